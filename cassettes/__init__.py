"""The recorded cassettes, shipped inside the wheel as `router.cassettes` (pyproject.toml maps
this folder there) so that an installed `jobrouter demo` replays them."""
