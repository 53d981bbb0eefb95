"""What a server started from an image runs: each layer's route through ATOM and aiter, read from their code as the
image holds them (never imported), and whether the image has every kernel on it. `python -m validation.route`."""
