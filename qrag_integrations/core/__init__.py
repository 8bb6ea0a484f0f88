"""Framework-free core: configuration, the two encoders and their Q-function, checkpoints,
the chunk index, the multi-step search, and safe writes to disk. Imports no LangChain/LlamaIndex."""
