"""Package data: versioned pattern files of the safety and security metrics."""
