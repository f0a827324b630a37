"""Reading ZLUDA trace folders and explaining them in the report\x27s terms (docs/evidence.md)."""
