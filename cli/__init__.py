"""llmcalc's command line: parse options, call ``analysis``, render tables or JSON."""
