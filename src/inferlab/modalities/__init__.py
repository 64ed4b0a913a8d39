"""Model kinds beyond decoder-only text generation, one module per kind.

- :mod:`.passes`: the shared pieces: a bidirectional attention op, a named datasheet-only
  efficiency and the roofline time of one forward pass.
- :mod:`.catalog`: the modality model specs (``catalog/*.yaml``), each with its config source.
- :mod:`.embeddings`: encoder-only embedding and reranker models.
- :mod:`.diffusion`: image and video generation (UNet and DiT denoisers).
- :mod:`.unet`: the UNet and VAE-decoder op graphs the diffusion module uses.
- :mod:`.vision`: VLM image tokens from processor settings, the vision encoder, TTFT with images.
- :mod:`.eager`: a pass run in eager PyTorch: the host issues each op, the GPU waits on it
  when the kernels are short (the vision encoders).
- :mod:`.whisper`: speech recognition over 30-second windows, real-time factor.
- :mod:`.tts`: text to speech: time to first audio chunk, streaming from a language model.
- :mod:`.on_device`: batch-1 decode as llama.cpp runs it (GGUF formats, Apple M-series).

GPU slices (MIG) are hardware views in :mod:`inferlab.specs.mig`.
"""
