"""The compiler: frontends lower source text to the shared IR; passes and automata follow."""
