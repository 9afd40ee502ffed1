from support import nodes  # noqa: F401  (the fixture)
