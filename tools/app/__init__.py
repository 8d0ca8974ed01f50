"""`elmo-app`: an interactive page (Gradio) that shows what an ELMo model's vectors do.

    elmo-app --model PATH_OR_ID [--port 7860]       # or: python app.py, make app

Three views, each a module of plain functions that the page calls and the tests call directly:

* `similarity`: sentences and a word: per layer, the cosine similarity of the word's occurrences (a heat map and
  the numbers) and a 2-D projection (PCA) of the occurrences coloured by sentence;
* `neighbours`: a word in a query sentence, and its nearest neighbours in context among the word occurrences of a
  small corpus (pasted or uploaded), one layer at a time;
* `contextuality`: the per-layer curves of `elmo-analyze` (self-similarity, intra-sentence similarity, MEV,
  anisotropy) for a pasted or uploaded text.

`session` holds what they share (the loaded model, the input checks and limits, embedding sentences), `figures`
the drawing (Pillow; matplotlib for `elmo-analyze`'s figure), `server` the page and the command. The page:
docs/app.md. Nothing here travels as remote code.
"""
