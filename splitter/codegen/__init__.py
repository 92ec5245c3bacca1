"""C code generation for sub-models (see issue: Code generation)."""
