"""Built-in scenarios: the default the app and CLI start from, and presets that teach one behaviour each."""
