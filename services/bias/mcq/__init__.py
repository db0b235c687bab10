"""ABCD (arXiv 2602.17445): the Matched-and-Dashed MCQ protocol and NonsenseQA."""
