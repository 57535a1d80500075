// Attention explorers: one ES module used three ways.
//   * JupyterLab / Colab: anywidget loads it as the widget's front end (two-way sync with Python).
//   * Static book site: the Python side inlines it in a <script type="module"> and renders it
//     against a small stand-in for the widget model (no kernel, no widget manager, no CDN).
// The attention math lives here, so moving a slider never needs Python:
//   scores = (x @ W_q[:, cols]) @ (x @ W_k[:, cols]).T * scale, causal mask -> -inf, softmax per row.
// Every heatmap cell carries its weight in data-weight (full precision) for the tests.
// Keep this file free of closing script tags and HTML comment openers: it is inlined into HTML.

const VIRIDIS = [
  [68, 1, 84], [72, 40, 120], [62, 74, 137], [49, 104, 142], [38, 130, 142],
  [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37],
];

// ---------------------------------------------------------------- math (float64)

function project(x, W, start, end) {
  // x: (T, d_in) @ W[:, start:end]: (d_in, end - start) -> (T, end - start)
  return x.map((row) => {
    const out = new Array(end - start);
    for (let c = start; c < end; c++) {
      let sum = 0;
      for (let i = 0; i < row.length; i++) sum += row[i] * W[i][c];
      out[c - start] = sum;
    }
    return out;
  });
}

function softmax(scores) {
  // Subtract the row maximum first (as torch does) so exp never overflows; exp(-inf) = 0.
  const top = Math.max(...scores);
  const exps = scores.map((s) => Math.exp(s - top));
  const total = exps.reduce((a, b) => a + b, 0);
  return exps.map((e) => e / total);
}

function attentionWeights(x, Wq, Wk, start, end, scale, causal) {
  // (T, T) weights of one head that uses the projection columns start..end-1.
  const queries = project(x, Wq, start, end);
  const keys = project(x, Wk, start, end);
  return queries.map((q, i) =>
    softmax(keys.map((k, j) => {
      if (causal && j > i) return -Infinity; // a query never sees a later key
      let dot = 0;
      for (let c = 0; c < q.length; c++) dot += q[c] * k[c];
      return dot * scale;
    })),
  );
}

function entropy(row) {
  // Shannon entropy in nats; 0 for a one-hot row, log(T) for a uniform row.
  return row.reduce((acc, w) => (w > 0 ? acc - w * Math.log(w) : acc), 0);
}

function divisors(n) {
  const out = [];
  for (let k = 1; k <= n; k++) if (n % k === 0) out.push(k);
  return out;
}

// ---------------------------------------------------------------- small DOM helpers

function h(tag, attrs = {}, children = []) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (key === "text") node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// "d_k" -> d<sub>k</sub>: a single letter, an underscore and a subscript, as in the book's math
// (d_k, d_out, W_q); names such as head_dim stay as they are. Returns nodes for append().
const SUBSCRIPTED = /(^|[^A-Za-z0-9_])([A-Za-z])_([A-Za-z0-9]+)(?![A-Za-z0-9_])/g;
function typeset(text) {
  const nodes = [];
  let last = 0;
  for (const match of String(text).matchAll(SUBSCRIPTED)) {
    const start = match.index + match[1].length;
    nodes.push(String(text).slice(last, start) + match[2], h("sub", { text: match[3] }));
    last = match.index + match[0].length;
  }
  nodes.push(String(text).slice(last));
  return nodes;
}

function setText(element, text) {
  // textContent with subscripts typeset; nothing changes when the text is the same
  if (element.abxText === text) return;
  element.abxText = text;
  element.replaceChildren(...typeset(text));
}

function viridis(value) {
  const v = Math.min(1, Math.max(0, value)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(v));
  const t = v - i;
  const [a, b] = [VIRIDIS[i], VIRIDIS[i + 1]];
  return a.map((c, k) => Math.round(c + (b[k] - c) * t));
}

function colour(value) {
  return "rgb(" + viridis(value).join(",") + ")";
}

function textColour(value) {
  // Black or white, whichever contrasts more with the cell (WCAG relative luminance).
  const [r, g, b] = viridis(value).map((c) => {
    const s = c / 255;
    return s <= 0.04045 ? s / 12.92 : Math.pow((s + 0.055) / 1.055, 2.4);
  });
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  return (luminance + 0.05) / 0.05 > 1.05 / (luminance + 0.05) ? "#000" : "#fff";
}

let idCounter = 0;
function uniqueId(prefix) {
  // Unique on the page even when the same explorer is shown twice (each copy loads this module).
  idCounter += 1;
  return prefix + "-" + Math.random().toString(36).slice(2, 8) + "-" + idCounter;
}

function stopKeys(input) {
  // JupyterLab treats arrow keys as notebook commands unless the widget keeps them.
  input.addEventListener("keydown", (event) => event.stopPropagation());
}

function slider(parent, { label, min, max, value, describe, onInput, name }) {
  const id = uniqueId("abx-" + name);
  const input = h("input", { type: "range", id, min, max, step: 1, value, "data-control": name });
  const output = h("output", { for: id, "aria-hidden": "true" });
  const set = (v) => {
    input.value = String(v);
    const text = describe(v);
    setText(output, text);
    input.setAttribute("aria-valuetext", text);
  };
  stopKeys(input);
  input.addEventListener("input", () => onInput(Number(input.value)));
  parent.append(h("div", { class: "abx-control" }, [h("label", { for: id }, typeset(label)), input, output]));
  set(value);
  return { input, set };
}

function checkbox(parent, { label, checked, onChange, name }) {
  const id = uniqueId("abx-" + name);
  const input = h("input", { type: "checkbox", id, "data-control": name });
  input.checked = Boolean(checked);
  stopKeys(input);
  input.addEventListener("change", () => onChange(input.checked));
  parent.append(h("div", { class: "abx-control" }, [input, h("label", { for: id }, typeset(label))]));
  return { input, set: (v) => { input.checked = Boolean(v); } };
}

function fmt(value, digits = 2) {
  return value.toFixed(digits);
}

// A (rows x cols) table of weights; update() recolours it in place (no re-layout of the table).
// compact: colour only (the weight is in the cell's tooltip) and numbered key columns, so that
// many heads fit on one screen.
function heatmap({ caption, rowLabels, colLabels, head = 0, extras = [], compact = false }) {
  const captionId = uniqueId("abx-cap");
  const box = h("div", { class: "abx-map", role: "group", "aria-labelledby": captionId, "data-head": head });
  box.append(h("div", { class: "abx-caption", id: captionId, text: caption }));
  const table = h("table", { class: "abx-table" + (compact ? " abx-compact" : "") });
  const headRow = h("tr", {}, [h("th", { scope: "col", class: "abx-corner", text: compact ? "key \u2192" : "query \u2193 key \u2192" })]);
  colLabels.forEach((label, j) => headRow.append(h("th", { scope: "col", class: "abx-col", title: label, text: compact ? String(j + 1) : label })));
  extras.forEach((extra) => headRow.append(h("th", { scope: "col", class: "abx-extra-head", text: extra.label })));
  table.append(h("thead", {}, [headRow]));
  const body = h("tbody");
  const rows = [];
  const cells = rowLabels.map((rowLabel, i) => {
    const tr = h("tr", { "data-row": i }, [h("th", { scope: "row", class: "abx-row", text: compact ? i + 1 + " " + rowLabel : rowLabel })]);
    const rowCells = colLabels.map((colLabel, j) => {
      const td = h("td", { class: "abx-cell", "data-row": i, "data-col": j });
      tr.append(td);
      return td;
    });
    const extraCells = extras.map((extra) => {
      const td = h("td", { class: "abx-extra", "data-stat": extra.key, "data-row": i });
      tr.append(td);
      return td;
    });
    rows.push({ tr, extraCells });
    body.append(tr);
    return rowCells;
  });
  table.append(body);
  box.append(table);

  function update(weights, { masked = null, selectedRow = -1 } = {}) {
    weights.forEach((row, i) => {
      row.forEach((w, j) => {
        const td = cells[i][j];
        const isMasked = Boolean(masked && masked(i, j));
        const key = w + (isMasked ? "m" : "");
        if (td.dataset.weight !== undefined && td.abxKey === key) return; // unchanged: no DOM writes
        td.abxKey = key;
        td.dataset.weight = String(w);
        if (!compact) td.textContent = isMasked ? "0" : fmt(w);
        td.style.backgroundColor = colour(w);
        td.style.color = textColour(w);
        td.classList.toggle("abx-masked", isMasked);
        td.title = rowLabels[i] + " \u2192 " + colLabels[j] + ": " + (isMasked ? "masked, 0" : w.toFixed(4));
      });
      rows[i].tr.classList.toggle("abx-selected", i === selectedRow);
      extras.forEach((extra, k) => {
        const value = extra.value(row, i);
        rows[i].extraCells[k].dataset.value = String(value);
        rows[i].extraCells[k].textContent = extra.format(value);
      });
    });
  }
  return { el: box, update };
}

function legend() {
  const bar = h("span", { class: "abx-legend-bar", "aria-hidden": "true" });
  bar.style.background = "linear-gradient(to right," + [0, 0.25, 0.5, 0.75, 1].map(colour).join(",") + ")";
  return h("div", { class: "abx-legend" }, [h("span", { text: "weight 0" }), bar, h("span", { text: "1" })]);
}

function listen(model, names, callback) {
  names.forEach((name) => model.on("change:" + name, callback));
  return () => names.forEach((name) => model.off("change:" + name, callback));
}

function frame(root, model, fallbackTitle, { withLegend = true } = {}) {
  // withLegend: the heatmaps' colour scale below the maps
  const title = model.get("title") || fallbackTitle;
  root.append(h("div", { class: "abx-title" }, typeset(title)));
  const controls = h("div", { class: "abx-controls" });
  const status = h("div", { class: "abx-status", "aria-live": "polite" });
  const maps = h("div", { class: "abx-maps" });
  root.append(controls, status, maps);
  if (withLegend) root.append(legend());
  return { controls, status, maps };
}

// ---------------------------------------------------------------- the four explorers

function dkExplorer(root, model) {
  const tokens = model.get("tokens");
  const x = model.get("inputs");
  const Wq = model.get("w_query");
  const Wk = model.get("w_key");
  const maxDk = Wq[0].length;
  const { controls, status, maps } = frame(root, model, "Scaling by 1/\u221Ad_k");
  const dkSlider = slider(controls, {
    name: "d_k", label: "d_k", min: 1, max: maxDk, value: model.get("d_k"),
    describe: (v) => String(v) + " of " + maxDk,
    onInput: (v) => { model.set("d_k", v); model.save_changes(); },
  });
  const scaledBox = checkbox(controls, {
    name: "scaled", label: "divide scores by \u221Ad_k", checked: model.get("scaled"),
    onChange: (v) => { model.set("scaled", v); model.save_changes(); },
  });
  const map = heatmap({
    caption: "attention weights", rowLabels: tokens, colLabels: tokens,
    extras: [
      { key: "max", label: "max", value: (row) => Math.max(...row), format: (v) => fmt(v) },
      { key: "entropy", label: "entropy", value: (row) => entropy(row), format: (v) => fmt(v) },
    ],
  });
  maps.append(map.el);
  function draw() {
    const dk = model.get("d_k");
    const scaled = model.get("scaled");
    const scale = scaled ? 1 / Math.sqrt(dk) : 1;
    const weights = attentionWeights(x, Wq, Wk, 0, dk, scale, false);
    map.update(weights);
    dkSlider.set(dk);
    scaledBox.set(scaled);
    const meanEntropy = weights.reduce((acc, row) => acc + entropy(row), 0) / weights.length;
    setText(status, "d_k = " + dk + ", scores \u00D7 " + fmt(scale, 4) +
      (scaled ? " (1/\u221A" + dk + ")" : " (unscaled)") + "; mean row entropy " + fmt(meanEntropy, 3) +
      " nats (uniform: " + fmt(Math.log(tokens.length), 3) + ")");
  }
  draw();
  return listen(model, ["d_k", "scaled"], draw);
}

function headsExplorer(root, model) {
  const tokens = model.get("tokens");
  const x = model.get("inputs");
  const Wq = model.get("w_query");
  const Wk = model.get("w_key");
  const dOut = Wq[0].length;
  const options = divisors(dOut);
  const { controls, status, maps } = frame(root, model, "Splitting d_out into heads");
  const headsSlider = slider(controls, {
    name: "num_heads", label: "heads", min: 0, max: options.length - 1,
    value: Math.max(0, options.indexOf(model.get("num_heads"))),
    describe: (index) => options[index] + " \u00D7 head_dim " + dOut / options[index],
    onInput: (index) => { model.set("num_heads", options[index]); model.save_changes(); },
  });
  const causalBox = checkbox(controls, {
    name: "causal", label: "causal mask", checked: model.get("causal"),
    onChange: (v) => { model.set("causal", v); model.save_changes(); },
  });
  // Every layout (1, 2, 4, ... heads) is built once; only the one shown is displayed, so the
  // explorer is as tall as the layout it shows (no empty band below a short layout). Changing
  // the number of heads switches which prebuilt layout is displayed: no DOM is created.
  const COMPACT_ABOVE = 4; // more heads than this: compact maps (colour only), several per row
  maps.classList.add("abx-stack");
  const layouts = {};
  options.forEach((numHeads) => {
    const headDim = dOut / numHeads;
    const compact = numHeads > COMPACT_ABOVE;
    const heads = [];
    for (let head = 0; head < numHeads; head++) {
      const cols = headDim === 1 ? "column " + head : "columns " + head * headDim + "\u2013" + ((head + 1) * headDim - 1);
      heads.push(heatmap({ caption: "head " + (head + 1) + " (" + cols + ")", rowLabels: tokens, colLabels: tokens, head, compact }));
    }
    const el = h("div", { class: "abx-config" + (compact ? " abx-compact-maps" : ""), "data-num-heads": numHeads }, heads.map((map) => map.el));
    maps.append(el);
    layouts[numHeads] = { el, heads };
  });
  let shown = null;
  function draw() {
    const numHeads = model.get("num_heads");
    const causal = model.get("causal");
    const headDim = dOut / numHeads;
    const layout = layouts[numHeads];
    if (shown !== layout) {
      if (shown) shown.el.classList.remove("abx-shown");
      layout.el.classList.add("abx-shown");
      shown = layout;
    }
    const scale = 1 / Math.sqrt(headDim);
    layout.heads.forEach((map, head) => {
      const weights = attentionWeights(x, Wq, Wk, head * headDim, (head + 1) * headDim, scale, causal);
      map.update(weights, { masked: causal ? (i, j) => j > i : null });
    });
    headsSlider.set(Math.max(0, options.indexOf(numHeads)));
    causalBox.set(causal);
    setText(status, numHeads + (numHeads === 1 ? " head" : " heads") + " of head_dim " + headDim +
      " (d_out = " + dOut + "), each scaled by 1/\u221A" + headDim + (causal ? ", causal mask on" : "") +
      (numHeads > COMPACT_ABOVE ? "; columns numbered as the rows, hover a cell for its weight" : ""));
  }
  draw();
  return listen(model, ["num_heads", "causal"], draw);
}

function maskExplorer(root, model) {
  const tokens = model.get("tokens");
  const x = model.get("inputs");
  const Wq = model.get("w_query");
  const Wk = model.get("w_key");
  const dOut = Wq[0].length;
  const T = tokens.length;
  const { controls, status, maps } = frame(root, model, "The causal mask");
  const causalBox = checkbox(controls, {
    name: "causal", label: "causal mask (hide later tokens)", checked: model.get("causal"),
    onChange: (v) => { model.set("causal", v); model.save_changes(); },
  });
  const querySlider = slider(controls, {
    name: "query_index", label: "query", min: 0, max: T - 1, value: model.get("query_index"),
    describe: (i) => "\u201C" + tokens[i] + "\u201D (row " + (i + 1) + ")",
    onInput: (v) => { model.set("query_index", v); model.save_changes(); },
  });
  const map = heatmap({
    caption: "attention weights", rowLabels: tokens, colLabels: tokens,
    extras: [{ key: "row_sum", label: "row sum", value: (row) => row.reduce((a, b) => a + b, 0), format: (v) => v.toFixed(6) }],
  });
  const bars = h("div", { class: "abx-bars", role: "group" });
  maps.append(map.el, bars);
  function draw() {
    const causal = model.get("causal");
    const query = model.get("query_index");
    const weights = attentionWeights(x, Wq, Wk, 0, dOut, 1 / Math.sqrt(dOut), causal);
    map.update(weights, { masked: causal ? (i, j) => j > i : null, selectedRow: query });
    causalBox.set(causal);
    querySlider.set(query);
    bars.replaceChildren(h("div", { class: "abx-caption", text: "query \u201C" + tokens[query] + "\u201D attends to" }));
    weights[query].forEach((w, j) => {
      const isMasked = causal && j > query;
      const fill = h("span", { class: "abx-bar-fill" });
      fill.style.width = (100 * w).toFixed(2) + "%";
      bars.append(h("div", { class: "abx-bar" + (isMasked ? " abx-masked-bar" : "") }, [
        h("span", { class: "abx-bar-label", text: tokens[j] }),
        h("span", { class: "abx-bar-track" }, [fill]),
        h("span", { class: "abx-bar-value", text: isMasked ? "0 (masked)" : fmt(w, 3) }),
      ]));
    });
    const hidden = causal ? T - 1 - query : 0;
    const total = weights[query].reduce((a, b) => a + b, 0);
    status.textContent = "\u201C" + tokens[query] + "\u201D sees " + (T - hidden) + " of " + T + " tokens" +
      (hidden ? "; its " + hidden + " masked " + (hidden === 1 ? "weight is" : "weights are") + " exactly 0" : "") +
      "; the row sums to " + total.toFixed(6);
  }
  draw();
  return listen(model, ["causal", "query_index"], draw);
}

function lossChart(steps, losses, width = 280, height = 110) {
  const NS = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 " + width + " " + height);
  svg.setAttribute("class", "abx-loss");
  svg.setAttribute("role", "img");
  const pad = 36; // room for y labels such as "10.91"
  const lo = Math.min(...losses);
  const hi = Math.max(...losses);
  const first = steps[0];
  const last = steps[steps.length - 1];
  const px = (s) => pad + ((s - first) / (last - first || 1)) * (width - pad - 6);
  const py = (l) => 6 + (1 - (l - lo) / (hi - lo || 1)) * (height - pad - 6);
  const line = document.createElementNS(NS, "polyline");
  line.setAttribute("points", steps.map((s, i) => px(s).toFixed(1) + "," + py(losses[i]).toFixed(1)).join(" "));
  line.setAttribute("class", "abx-loss-line");
  const marker = document.createElementNS(NS, "circle");
  marker.setAttribute("r", "4");
  marker.setAttribute("class", "abx-loss-marker");
  const label = (text, x, y, anchor) => {
    const node = document.createElementNS(NS, "text");
    node.setAttribute("x", x);
    node.setAttribute("y", y);
    node.setAttribute("text-anchor", anchor);
    node.textContent = text;
    return node;
  };
  svg.append(line, marker,
    label(hi.toFixed(2), pad - 3, 12, "end"), label(lo.toFixed(2), pad - 3, height - pad, "end"),
    label("step " + first, pad, height - 8, "start"), label(String(last), width - 6, height - 8, "end"));
  const show = (step) => {
    let k = 0;
    for (let i = 0; i < steps.length; i++) if (steps[i] <= step) k = i;
    marker.setAttribute("cx", px(steps[k]).toFixed(1));
    marker.setAttribute("cy", py(losses[k]).toFixed(1));
    svg.setAttribute("aria-label", "training loss; at step " + steps[k] + " it is " + losses[k].toFixed(4));
  };
  return { el: svg, show };
}

function select(parent, { label, options, value, onChange, name }) {
  // A native drop-down: keyboard operable (arrow keys, type-ahead) and labelled.
  const id = uniqueId("abx-" + name);
  const input = h("select", { id, "data-control": name });
  options.forEach((text, i) => input.append(h("option", { value: i, text })));
  input.value = String(value);
  stopKeys(input);
  input.addEventListener("change", () => onChange(Number(input.value)));
  parent.append(h("div", { class: "abx-control" }, [h("label", { for: id, text: label }), input]));
  return { input, set: (v) => { input.value = String(v); } };
}

function trainingPlayback(root, model) {
  const sentences = model.get("tokens"); // (S, T) token labels
  const steps = model.get("steps");
  const snapshots = model.get("snapshots"); // (steps, S, H, T, T)
  const losses = model.get("losses");
  const lossSteps = model.get("loss_steps");
  const numHeads = snapshots[0][0].length;
  const { controls, status, maps } = frame(root, model, "Attention weights during training");
  const sentenceSelect = sentences.length > 1 ? select(controls, {
    name: "sentence_index", label: "sentence", value: model.get("sentence_index"),
    options: sentences.map((tokens, i) => i + 1 + ": " + tokens.join(" ")),
    onChange: (v) => { model.set("sentence_index", v); model.save_changes(); },
  }) : null;
  const stepSlider = slider(controls, {
    name: "snapshot_index", label: "training step", min: 0, max: steps.length - 1,
    value: model.get("snapshot_index"),
    describe: (i) => String(steps[i]),
    onInput: (v) => { stopPlaying(); model.set("snapshot_index", v); model.save_changes(); },
  });
  const button = h("button", { type: "button", class: "abx-play", "data-control": "play", text: "\u25B6 play" });
  stopKeys(button);
  controls.append(button);
  let timer = null;
  function stopPlaying() {
    if (timer !== null) clearInterval(timer);
    timer = null;
    button.textContent = "\u25B6 play";
  }
  button.addEventListener("click", () => {
    if (timer !== null) return stopPlaying();
    if (model.get("snapshot_index") >= steps.length - 1) { model.set("snapshot_index", 0); model.save_changes(); }
    button.textContent = "\u275A\u275A pause";
    timer = setInterval(() => {
      const next = model.get("snapshot_index") + 1;
      if (next >= steps.length) return stopPlaying();
      model.set("snapshot_index", next);
      model.save_changes();
    }, 250);
  });
  const heads = h("div", { class: "abx-maps" });
  maps.append(heads);
  const chart = losses.length ? lossChart(lossSteps, losses) : null;
  if (chart) maps.append(h("div", { class: "abx-map" }, [h("div", { class: "abx-caption", text: "loss" }), chart.el]));
  let shownSentence = -1;
  let heatmaps = [];
  function showSentence(sentence) {
    // the maps' row and column labels are the tokens of the sentence shown
    const tokens = sentences[sentence];
    heatmaps = [];
    for (let head = 0; head < numHeads; head++) {
      const caption = numHeads === 1 ? "attention weights" : "head " + (head + 1);
      heatmaps.push(heatmap({ caption, rowLabels: tokens, colLabels: tokens, head }));
    }
    heads.replaceChildren(...heatmaps.map((map) => map.el));
    shownSentence = sentence;
  }
  function lossAt(step) {
    let value = null;
    lossSteps.forEach((s, i) => { if (s <= step) value = losses[i]; });
    return value;
  }
  function draw() {
    const index = model.get("snapshot_index");
    const sentence = model.get("sentence_index");
    const causal = model.get("causal");
    if (sentence !== shownSentence) showSentence(sentence);
    heatmaps.forEach((map, head) => map.update(snapshots[index][sentence][head], { masked: causal ? (i, j) => j > i : null }));
    stepSlider.set(index);
    if (sentenceSelect) sentenceSelect.set(sentence);
    const loss = losses.length ? lossAt(steps[index]) : null;
    if (chart) chart.show(steps[index]);
    status.textContent = (sentences.length > 1 ? "sentence " + (sentence + 1) + " of " + sentences.length + ", " : "") +
      "step " + steps[index] + " (snapshot " + (index + 1) + " of " + steps.length + ")" +
      (loss === null ? "" : "; loss " + loss.toFixed(4)) + (causal ? "; hatched: masked (later tokens)" : "");
  }
  draw();
  const unlisten = listen(model, ["snapshot_index", "sentence_index", "causal"], draw);
  return () => { stopPlaying(); unlisten(); };
}

// ---------------------------------------------------------------- the sampling explorer (chapter 9)
// The cuts run in the order of attention_book.sampling.next_token_probabilities: divide the
// logits by the temperature, keep the k highest, then the nucleus (top-p) of what is left.

function samplingDistribution(logits, temperature, k, p) {
  // probs: softmax(logits / T) over every token; kept: survives top-k and top-p;
  // final: probs renormalised over the kept tokens (what sampling draws from).
  const n = logits.length;
  const probs = softmax(logits.map((z) => z / temperature));
  // most likely first; equal logits keep their order (a stable sort, as torch.sort(stable=True))
  const order = [...Array(n).keys()].sort((a, b) => logits[b] - logits[a] || a - b);
  const topK = order.slice(0, Math.min(k, n));
  const massK = topK.reduce((sum, i) => sum + probs[i], 0);
  const kept = new Array(n).fill(false);
  let before = 0; // mass of the more likely tokens, renormalised over the top k
  for (const i of topK) {
    if (p < 1 && before >= p) break; // they already reach p: this token is not needed
    kept[i] = true;
    before += probs[i] / massK;
  }
  const keptMass = probs.reduce((sum, q, i) => (kept[i] ? sum + q : sum), 0);
  const final = probs.map((q, i) => (kept[i] ? q / keptMass : 0));
  return { probs, kept, final, keptMass, order };
}

function visibleToken(token) {
  // GPT-2 tokens often start with a space: show it (and newlines, tabs) instead of nothing
  if (token === "") return "(empty)";
  return token.replace(/ /g, "\u2423").replace(/\n/g, "\u23CE").replace(/\t/g, "\u21E5");
}

// The temperature and p sliders move in steps of 0.05; their positions are integers.
const TEMPERATURE_STEPS = { first: 2, last: 40 }; // T = position / 20: 0.10 .. 2.00
const TOP_P_STEPS = { first: 1, last: 20 }; // p = position / 20: 0.05 .. 1.00

function stepPosition(value, steps) {
  return Math.min(steps.last, Math.max(steps.first, Math.round(value * 20))) - steps.first;
}

function samplingExplorer(root, model) {
  const tokens = model.get("tokens");
  const logits = model.get("logits");
  const n = tokens.length;
  const { controls, status, maps } = frame(root, model, "Sampling the next token", { withLegend: false });
  const temperatureSlider = slider(controls, {
    name: "temperature", label: "temperature",
    min: 0, max: TEMPERATURE_STEPS.last - TEMPERATURE_STEPS.first,
    value: stepPosition(model.get("temperature"), TEMPERATURE_STEPS),
    describe: () => "T = " + fmt(model.get("temperature")),
    onInput: (v) => { model.set("temperature", (v + TEMPERATURE_STEPS.first) / 20); model.save_changes(); },
  });
  const kSlider = slider(controls, {
    name: "top_k", label: "top-k", min: 1, max: n, value: model.get("top_k"),
    describe: (v) => (v >= n ? "off (all " + n + ")" : "k = " + v),
    onInput: (v) => { model.set("top_k", v); model.save_changes(); },
  });
  const pSlider = slider(controls, {
    name: "top_p", label: "top-p", min: 0, max: TOP_P_STEPS.last - TOP_P_STEPS.first,
    value: stepPosition(model.get("top_p"), TOP_P_STEPS),
    describe: () => (model.get("top_p") >= 1 ? "off (p = 1)" : "p = " + fmt(model.get("top_p"))),
    onInput: (v) => { model.set("top_p", (v + TOP_P_STEPS.first) / 20); model.save_changes(); },
  });
  const captionId = uniqueId("abx-cap");
  const box = h("div", { class: "abx-map abx-dist-box", role: "group", "aria-labelledby": captionId });
  box.append(h("div", { class: "abx-caption", id: captionId, text: "next-token probabilities, most likely first" }));
  const table = h("table", { class: "abx-dist" });
  table.append(h("thead", {}, [h("tr", {}, [
    h("th", { scope: "col", text: "token" }),
    h("th", { scope: "col", text: "dark: after temperature; light: added by renormalising" }),
    h("th", { scope: "col", text: "probability" }),
  ])]));
  const body = h("tbody");
  const { order } = samplingDistribution(logits, 1, n, 1);
  const rows = order.map((index) => {
    const before = h("span", { class: "abx-dist-before" });
    const after = h("span", { class: "abx-dist-after" });
    const value = h("td", { class: "abx-dist-value" });
    const tr = h("tr", { class: "abx-dist-row", "data-index": index }, [
      h("th", { scope: "row", class: "abx-dist-token", title: JSON.stringify(tokens[index]), text: visibleToken(tokens[index]) }),
      h("td", { class: "abx-dist-bar" }, [h("span", { class: "abx-dist-track" }, [after, before])]),
      value,
    ]);
    body.append(tr);
    return { index, tr, before, after, value };
  });
  table.append(body);
  box.append(table);
  maps.append(box);
  function draw() {
    const temperature = model.get("temperature");
    const k = model.get("top_k");
    const p = model.get("top_p");
    const { probs, kept, final, keptMass } = samplingDistribution(logits, temperature, k, p);
    const scale = Math.max(...final);
    rows.forEach(({ index, tr, before, after, value }) => {
      tr.dataset.prob = String(probs[index]);
      tr.dataset.final = String(final[index]);
      tr.dataset.kept = String(kept[index]);
      tr.classList.toggle("abx-cut", !kept[index]);
      before.style.width = ((100 * probs[index]) / scale).toFixed(2) + "%";
      after.style.width = ((100 * final[index]) / scale).toFixed(2) + "%";
      value.textContent = kept[index] ? fmt(probs[index], 3) + " \u2192 " + fmt(final[index], 3) : fmt(probs[index], 3) + " cut";
    });
    temperatureSlider.set(stepPosition(temperature, TEMPERATURE_STEPS));
    kSlider.set(k);
    pSlider.set(stepPosition(p, TOP_P_STEPS));
    const count = kept.filter(Boolean).length;
    status.dataset.keptMass = String(keptMass);
    status.textContent = "kept " + count + " of " + n + " tokens, holding " + fmt(keptMass, 3) +
      " of the probability after temperature" +
      (count === 1 ? "; one token left: sampling is greedy" : "; sampling renormalises them to sum to 1") +
      (count < n ? " (hatched rows: cut)" : "");
  }
  draw();
  return listen(model, ["temperature", "top_k", "top_p"], draw);
}

const EXPLORERS = { dk: dkExplorer, heads: headsExplorer, mask: maskExplorer, playback: trainingPlayback,
  sampling: samplingExplorer };
const DATA_TRAITS = ["kind", "title", "tokens", "inputs", "w_query", "w_key", "steps", "snapshots", "losses", "loss_steps",
  "logits"];

function render({ model, el }) {
  const root = h("div", { class: "abx" });
  el.append(root);
  let teardown = null;
  function build() {
    if (teardown) teardown();
    teardown = null;
    root.replaceChildren();
    const kind = model.get("kind");
    root.setAttribute("data-explorer", kind);
    try {
      teardown = EXPLORERS[kind](root, model);
    } catch (error) {
      root.replaceChildren(h("div", { class: "abx-error", text: "explorer could not draw: " + error.message }));
      throw error;
    }
  }
  build();
  const unlisten = listen(model, DATA_TRAITS, build);
  return () => {
    unlisten();
    if (teardown) teardown();
  };
}

export default { render };
