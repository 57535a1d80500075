"""Tests of chapter 2's self-checks: right answers pass, typical wrong answers get their hint."""

import torch

from attention_book.checks import HISTORY, ch02


def hints(verdict):
    return " | ".join(hint for _, hint in verdict.failed)


# --- ex-02-score-loop -----------------------------------------------------------------------------


def loop_scores(queries, keys):
    scores = torch.empty(queries.shape[0], keys.shape[0])
    for i, query in enumerate(queries):
        for j, key in enumerate(keys):
            scores[i, j] = torch.dot(query, key)
    return scores


def test_score_loop_accepts_the_loop():
    verdict = ch02.score_loop(loop_scores)
    assert verdict.ok, str(verdict)
    assert verdict.score == 1.0
    assert HISTORY["ex-02-score-loop"] is verdict


def test_score_loop_accepts_the_matrix_product_too():
    assert ch02.score_loop(lambda q, k: q @ k.T).ok


def test_score_loop_transposed():
    verdict = ch02.score_loop(lambda q, k: k @ q.T)
    assert not verdict.ok
    assert "transposed" in hints(verdict)
    assert "(5, 3) = (keys, queries)" in hints(verdict)


def test_score_loop_wrong_indices():
    def swapped_inside(queries, keys):  # square inputs only differ in values: loop over the wrong pair
        scores = torch.empty(queries.shape[0], keys.shape[0])
        for i in range(queries.shape[0]):
            for j in range(keys.shape[0]):
                scores[i, j] = torch.dot(queries[i], queries[min(j, queries.shape[0] - 1)])
        return scores

    verdict = ch02.score_loop(swapped_inside)
    assert "check the loop indices" in hints(verdict)


def test_score_loop_zeros():
    verdict = ch02.score_loop(lambda q, k: torch.zeros(q.shape[0], k.shape[0]))
    assert "every score is 0" in hints(verdict)


def test_score_loop_not_implemented():
    def stub(queries, keys):
        raise NotImplementedError("ex-02-score-loop: write your code here")

    verdict = ch02.score_loop(stub)
    assert verdict.not_implemented
    assert "not implemented yet" in str(verdict)
    assert verdict.score == 0.0


def test_score_loop_crash_is_reported_not_raised():
    verdict = ch02.score_loop(lambda q, k: q.undefined_method())
    assert not verdict.ok
    assert "AttributeError" in hints(verdict)


# --- ex-02-projected-scores -----------------------------------------------------------------------


def correct_projected(inputs, W_query, W_key):
    queries = inputs @ W_query  # (T, d_k)
    keys = inputs @ W_key  # (T, d_k)
    return queries @ keys.T  # (T, T)


def test_projected_scores_correct():
    verdict = ch02.projected_scores(correct_projected)
    assert verdict.ok, str(verdict)


def test_projected_scores_transposed_product():
    verdict = ch02.projected_scores(lambda x, wq, wk: (x @ wk) @ (x @ wq).T)
    assert "transposed (keys @ queries.T)" in hints(verdict)


def test_projected_scores_forgot_projection():
    verdict = ch02.projected_scores(lambda x, wq, wk: x @ x.T)
    assert "first project them with W_query and W_key" in hints(verdict)


def test_projected_scores_query_weights_twice():
    verdict = ch02.projected_scores(lambda x, wq, wk: (x @ wq) @ (x @ wq).T)
    assert "you used W_query for the keys too" in hints(verdict)


def test_projected_scores_weight_orientation():
    # nn.Linear habit: x @ W.T with W of shape (d_in, d_out) fails to multiply
    verdict = ch02.projected_scores(lambda x, wq, wk: (x @ wq.T) @ (x @ wk.T).T)
    assert "a matrix product failed" in hints(verdict)
    assert "inputs @ W_query" in hints(verdict)


def test_projected_scores_already_scaled():
    verdict = ch02.projected_scores(lambda x, wq, wk: torch.softmax((x @ wq) @ (x @ wk).T / 2.0, dim=-1))
    assert "scaling and softmax come in chapter 3" in hints(verdict)


def test_projected_scores_detached():
    verdict = ch02.projected_scores(lambda x, wq, wk: correct_projected(x, wq, wk).detach())
    assert "no grad_fn" in hints(verdict)
    assert verdict.score == 0.75


def test_projected_scores_hard_coded_size():
    def hard_coded(x, wq, wk):
        return correct_projected(x[:5], wq, wk)[:5, :5] if x.shape[0] == 5 else torch.zeros(5, 5)

    verdict = ch02.projected_scores(hard_coded)
    assert "do not hard-code any size" in hints(verdict)


def test_projected_scores_not_implemented():
    def stub(inputs, W_query, W_key):
        raise NotImplementedError

    assert ch02.projected_scores(stub).summary().endswith("not implemented yet")
