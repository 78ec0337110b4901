"""Report text: sections and formatting (:mod:`radharmony.reports.format`)."""
