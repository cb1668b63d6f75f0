"""Tiny HuggingFace models for the zoo: each built from a config offline (random weights,
nothing downloaded), with the inputs people give them.

A spec is `(name, family, build, inputs)`: `build()` returns the model (train/eval is set by
the harness), `inputs(gen)` returns the keyword arguments of one call, drawn from `gen` so
that a second draw gives fresh values of the same shapes. Sizes are small (2 layers, hidden
32-64) so that the whole zoo runs on CPU in minutes.
"""
import torch

try:
    import transformers as tf
except ImportError:  # the zoo's HF half is skipped (tests importorskip transformers)
    tf = None

B, T = 2, 8          # batch, sequence length
V = 128              # vocabulary


def ids(gen, n=T, vocab=V, low=3):
    return torch.randint(low, vocab, (B, n), generator=gen)


def right_padded(n=T, pad=2):
    """Encoder-style padding: row 1 ends with `pad` padding positions."""
    m = torch.ones(B, n, dtype=torch.long)
    m[1, n - pad:] = 0
    return m


def left_padded(n=T, pad=2):
    """Decoder-style padding (as in batched generation): row 1 starts with padding."""
    m = torch.ones(B, n, dtype=torch.long)
    m[1, :pad] = 0
    return m


def lm_inputs(gen, labels=False, mask=left_padded):
    x = ids(gen)
    kw = dict(input_ids=x, attention_mask=mask())
    if labels:
        y = x.clone()
        y[kw["attention_mask"] == 0] = -100
        kw["labels"] = y
    return kw


def cls_inputs(gen, labels=False):
    kw = dict(input_ids=ids(gen), attention_mask=right_padded())
    if labels:
        kw["labels"] = torch.randint(0, 2, (B,), generator=gen)
    return kw


def seq2seq_inputs(gen, labels=False, dec_len=5):
    kw = dict(input_ids=ids(gen), attention_mask=right_padded())
    if labels:
        kw["labels"] = ids(gen, dec_len)
    else:
        kw["decoder_input_ids"] = ids(gen, dec_len)
    return kw


def pixel_inputs(size=32, channels=3):
    def make(gen, labels=False):
        kw = dict(pixel_values=torch.randn(B, channels, size, size, generator=gen))
        if labels:
            kw["labels"] = torch.randint(0, 2, (B,), generator=gen)
        return kw
    return make


def audio_inputs(n=1600):
    def make(gen, labels=False):
        kw = dict(input_values=torch.randn(B, n, generator=gen), attention_mask=right_padded(n, 400))
        if labels:
            kw["labels"] = torch.randint(3, 20, (B, 4), generator=gen)
        return kw
    return make


# common tiny sizes
DEC = dict(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
           intermediate_size=128, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
           eos_token_id=2)
ENC = dict(vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
           intermediate_size=128, max_position_embeddings=64, pad_token_id=0)
NODROP = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _dec(cfg_cls, model_cls, **extra):
    return lambda: getattr(tf, model_cls)(getattr(tf, cfg_cls)(**{**DEC, **extra}))


def _enc(cfg_cls, model_cls, **extra):
    return lambda: getattr(tf, model_cls)(getattr(tf, cfg_cls)(**{**ENC, **extra}))


def _s2s(cfg_cls, model_cls, **cfg):
    base = dict(vocab_size=V, d_model=64, encoder_layers=2, decoder_layers=2,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                decoder_ffn_dim=128, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                eos_token_id=2, decoder_start_token_id=1)
    return lambda: getattr(tf, model_cls)(getattr(tf, cfg_cls)(**{**base, **cfg}))


# the models `make test` runs (one per family; ZOO=full runs all), also on a GPU with inductor
# (tests/test_cuda_modes.py)
FAST = {("llama", "eval"), ("bert", "train"), ("t5", "eval"), ("wav2vec2", "eval"), ("vit", "eval")}


def hf_specs():
    """name -> (family, build, inputs(gen, labels))."""
    if tf is None:
        return {}
    kv2 = dict(num_key_value_heads=2)
    S = {}
    # ---- decoder language models (left-padded batch) ----
    S["gpt2"] = ("decoder", lambda: tf.GPT2LMHeadModel(tf.GPT2Config(
        vocab_size=V, n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=1,
        eos_token_id=2, pad_token_id=0)), lm_inputs)
    S["llama"] = ("decoder", _dec("LlamaConfig", "LlamaForCausalLM", **kv2), lm_inputs)
    S["mistral"] = ("decoder", _dec("MistralConfig", "MistralForCausalLM", **kv2), lm_inputs)
    S["qwen2"] = ("decoder", _dec("Qwen2Config", "Qwen2ForCausalLM", **kv2), lm_inputs)
    S["qwen3"] = ("decoder", _dec("Qwen3Config", "Qwen3ForCausalLM", head_dim=16, **kv2), lm_inputs)
    S["mixtral"] = ("decoder", _dec("MixtralConfig", "MixtralForCausalLM", num_local_experts=4,
                                    num_experts_per_tok=2, **kv2), lm_inputs)
    S["gemma"] = ("decoder", _dec("GemmaConfig", "GemmaForCausalLM", head_dim=16, **kv2), lm_inputs)
    S["gemma2"] = ("decoder", _dec("Gemma2Config", "Gemma2ForCausalLM", head_dim=16, sliding_window=4,
                                   **kv2), lm_inputs)
    S["phi"] = ("decoder", _dec("PhiConfig", "PhiForCausalLM", resid_pdrop=0.0), lm_inputs)
    S["phi3"] = ("decoder", _dec("Phi3Config", "Phi3ForCausalLM", **kv2), lm_inputs)
    S["stablelm"] = ("decoder", _dec("StableLmConfig", "StableLmForCausalLM", **kv2), lm_inputs)
    S["gpt_neox"] = ("decoder", _dec("GPTNeoXConfig", "GPTNeoXForCausalLM"), lm_inputs)
    S["opt"] = ("decoder", lambda: tf.OPTForCausalLM(tf.OPTConfig(
        vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
        max_position_embeddings=64, word_embed_proj_dim=64, pad_token_id=0, bos_token_id=1,
        eos_token_id=2)), lm_inputs)
    S["falcon"] = ("decoder", lambda: tf.FalconForCausalLM(tf.FalconConfig(
        vocab_size=V, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)), lm_inputs)
    S["bloom"] = ("decoder", lambda: tf.BloomForCausalLM(tf.BloomConfig(
        vocab_size=V, hidden_size=64, n_layer=2, n_head=4, pad_token_id=0, bos_token_id=1,
        eos_token_id=2)), lm_inputs)
    S["gptj"] = ("decoder", lambda: tf.GPTJForCausalLM(tf.GPTJConfig(
        vocab_size=V, n_embd=64, n_layer=2, n_head=4, rotary_dim=8, n_positions=64,
        pad_token_id=0, bos_token_id=1, eos_token_id=2)), lm_inputs)
    S["gpt_neo"] = ("decoder", lambda: tf.GPTNeoForCausalLM(tf.GPTNeoConfig(
        vocab_size=V, hidden_size=64, num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]],
        window_size=4, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
        eos_token_id=2)), lm_inputs)
    # ---- encoders (right-padded batch) ----
    S["bert"] = ("encoder", _enc("BertConfig", "BertForSequenceClassification"), cls_inputs)
    S["roberta"] = ("encoder", _enc("RobertaConfig", "RobertaForSequenceClassification",
                                    max_position_embeddings=80), cls_inputs)
    S["xlm_roberta"] = ("encoder", _enc("XLMRobertaConfig", "XLMRobertaForSequenceClassification",
                                        max_position_embeddings=80), cls_inputs)
    S["distilbert"] = ("encoder", lambda: tf.DistilBertForSequenceClassification(tf.DistilBertConfig(
        vocab_size=V, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=64,
        pad_token_id=0)), cls_inputs)
    S["albert"] = ("encoder", _enc("AlbertConfig", "AlbertForSequenceClassification",
                                   embedding_size=32), cls_inputs)
    S["electra"] = ("encoder", _enc("ElectraConfig", "ElectraForSequenceClassification",
                                    embedding_size=32), cls_inputs)
    S["deberta"] = ("encoder", _enc("DebertaConfig", "DebertaForSequenceClassification"), cls_inputs)
    S["deberta_v2"] = ("encoder", _enc("DebertaV2Config", "DebertaV2ForSequenceClassification"),
                       cls_inputs)
    S["mpnet"] = ("encoder", _enc("MPNetConfig", "MPNetForSequenceClassification",
                                  max_position_embeddings=80), cls_inputs)
    # ---- encoder-decoders ----
    S["t5"] = ("seq2seq", lambda: tf.T5ForConditionalGeneration(tf.T5Config(
        vocab_size=V, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_decoder_layers=2,
        num_heads=4, pad_token_id=0, eos_token_id=2, decoder_start_token_id=0)), seq2seq_inputs)
    S["bart"] = ("seq2seq", _s2s("BartConfig", "BartForConditionalGeneration"), seq2seq_inputs)
    S["mbart"] = ("seq2seq", _s2s("MBartConfig", "MBartForConditionalGeneration"), seq2seq_inputs)
    S["marian"] = ("seq2seq", _s2s("MarianConfig", "MarianMTModel", decoder_vocab_size=V),
                   seq2seq_inputs)
    S["pegasus"] = ("seq2seq", _s2s("PegasusConfig", "PegasusForConditionalGeneration"), seq2seq_inputs)
    # ---- speech ----
    wav = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               conv_dim=(32, 32), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16,
               num_conv_pos_embedding_groups=4, vocab_size=32, pad_token_id=0,
               feat_extract_norm="layer", do_stable_layer_norm=True, mask_time_prob=0.0)
    S["wav2vec2"] = ("speech", lambda: tf.Wav2Vec2ForCTC(tf.Wav2Vec2Config(**wav)), audio_inputs())
    S["hubert"] = ("speech", lambda: tf.HubertForCTC(tf.HubertConfig(**wav)), audio_inputs())
    S["whisper"] = ("speech", lambda: tf.WhisperForConditionalGeneration(tf.WhisperConfig(
        vocab_size=V, d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=16,
        max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1)), whisper_inputs)
    # ---- vision ----
    S["vit"] = ("vision", lambda: tf.ViTForImageClassification(tf.ViTConfig(
        hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        image_size=32, patch_size=8, num_labels=2)), pixel_inputs())
    S["resnet"] = ("vision", lambda: tf.ResNetForImageClassification(tf.ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic",
        num_labels=2)), pixel_inputs())
    S["convnext"] = ("vision", lambda: tf.ConvNextForImageClassification(tf.ConvNextConfig(
        num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=2)), pixel_inputs())
    S["swin"] = ("vision", lambda: tf.SwinForImageClassification(tf.SwinConfig(
        image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=4,
        num_labels=2)), pixel_inputs())
    S["mobilenet_v2"] = ("vision", lambda: tf.MobileNetV2ForImageClassification(tf.MobileNetV2Config(
        image_size=32, depth_multiplier=0.25, num_labels=2)), pixel_inputs())
    S["clip"] = ("vision", lambda: tf.CLIPModel(tf.CLIPConfig(
        text_config=dict(vocab_size=V, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=32),
        vision_config=dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, image_size=32, patch_size=8),
        projection_dim=16)), clip_inputs)
    return S


def whisper_inputs(gen, labels=False):
    kw = dict(input_features=torch.randn(B, 16, 32, generator=gen))
    if labels:
        kw["labels"] = ids(gen, 5)
    else:
        kw["decoder_input_ids"] = ids(gen, 5)
    return kw


def clip_inputs(gen, labels=False):
    kw = dict(input_ids=ids(gen), attention_mask=right_padded(),
              pixel_values=torch.randn(B, 3, 32, 32, generator=gen))
    if labels:
        kw["return_loss"] = True
    return kw
