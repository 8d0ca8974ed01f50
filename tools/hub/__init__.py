"""The Hub: the model card (its template `model_card.md` beside it) and the one-commit push of a folder."""
