"""What the screens share: charts and their settings, the formatting of figures, the footer, a row cursor."""
