"""Suite problems are data read by problems.loaders; this file only makes setuptools ship them."""
