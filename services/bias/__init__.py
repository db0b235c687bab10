"""Bias audits of language models: CAB counterfactual questions and bias-reduced MCQ evaluation."""
