# From https://github.com/karpathy/minGPT/blob/37baab71b9abea1b76ab957409a1cc2fbfba8a26/mingpt/__init__.py
# Copyright (c) 2020 Andrej Karpathy, MIT License (licence: tests/programs/LICENSE-minGPT). Unchanged below this header.
