"""The numpy backend: each primitive one numpy call (the reference the others are tested against)."""
