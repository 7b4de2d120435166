"""The HTML reports of scenarios and suites: self-contained files with inline SVG charts."""
