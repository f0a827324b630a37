"""Rule data (TOML) shipped with cuda4amd as the package `cuda4amd.ruledata`.

Nothing here runs: the loader is `cuda4amd.rules` (scanner/rules.py); the
files and their fields are described in docs/rules.md.
"""
