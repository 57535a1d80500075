"""Hostile submissions for the autograder tests: each attack of issue 13 as a notebook."""
