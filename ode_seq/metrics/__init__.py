"""Evaluation metrics: BLEU, ROUGE, MaxMatch (M2) and ERRANT wrappers."""
