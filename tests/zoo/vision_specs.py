"""Vision, detection and diffusion models for the zoo (issue 32): timm, torchvision and
diffusers, each built offline with random weights and a tiny configuration, with the inputs
their users give them.

A spec is `name -> (library, family, build, inputs, train_ok)`: `build()` returns the model,
`inputs(gen, train)` returns `(args, kwargs)` drawn from `gen` (a second draw: fresh values of
the same shapes), and `train_ok` says whether the model has a train-mode call people make
(detectors take targets in train mode and return losses). Each library is optional: its specs
are left out when it does not import (torchvision needs a torch it was built for: 2.14.1 with
torchvision 0.29.1 here).

Sizes are small (32-64 px images, one or two blocks per stage where the constructor allows)
so that the zoo runs on a CPU in minutes.
"""
import importlib

import torch


def _try(name):
    try:
        return importlib.import_module(name)
    except Exception:  # not installed, or built for another torch
        return None


tv = _try("torchvision")
timm = _try("timm")
diffusers = _try("diffusers")

B = 2


def image(gen, size=32, ch=3, b=B):
    return torch.randn(b, ch, size, size, generator=gen)


def _images(size=32):
    def inputs(gen, train):
        return (image(gen, size),), {}
    return inputs


# ---- timm -------------------------------------------------------------------------------------

def _timm(name, size=32, **kw):
    def build():
        return timm.create_model(name, pretrained=False, num_classes=10, **kw)
    return build, _images(size)


def _timm_class(path, size=32, **kw):
    """A timm model class built directly (its registered names fix the sizes we shrink)."""
    def build():
        mod, cls = path.rsplit(".", 1)
        return getattr(getattr(timm.models, mod), cls)(num_classes=10, **kw)
    return build, _images(size)


TIMM = {
    "timm_resnet18": ("cnn", *_timm("resnet18")),
    "timm_efficientnet_b0": ("cnn", *_timm("efficientnet_b0")),
    "timm_mobilenetv3": ("cnn", *_timm("mobilenetv3_small_100")),
    "timm_convnext": ("cnn", *_timm("convnext_atto")),
    "timm_regnet": ("cnn", *_timm("regnetx_002")),
    "timm_densenet": ("cnn", *_timm("densenet121", growth_rate=8, block_config=(1, 1, 1, 1))),
    "timm_vit": ("vit", *_timm("vit_tiny_patch16_224", img_size=32, patch_size=8, depth=2)),
    "timm_deit": ("vit", *_timm("deit_tiny_distilled_patch16_224", img_size=32, patch_size=8, depth=2)),
    "timm_swin": ("vit", *_timm("swin_tiny_patch4_window7_224", 64, img_size=64, window_size=4,
                                depths=(1, 1, 1, 1))),
    "timm_beit": ("vit", *_timm("beit_base_patch16_224", img_size=32, patch_size=8, depth=2,
                                embed_dim=64, num_heads=2)),
    "timm_mixer": ("mlp", *_timm_class("mlp_mixer.MlpMixer", 64, img_size=64, patch_size=16, num_blocks=2,
                                       embed_dim=64)),
    "timm_levit": ("vit", *_timm("levit_128s", 64, img_size=64)),
}

# ---- torchvision ------------------------------------------------------------------------------


def _tv(fn_name, size=32, **kw):
    def build():
        return getattr(tv.models, fn_name)(weights=None, **kw)
    return build, _images(size)


def _video(fn_name, **kw):
    def build():
        return getattr(tv.models.video, fn_name)(weights=None, **kw)

    def inputs(gen, train):
        return (torch.randn(B, 3, 4, 32, 32, generator=gen),), {}
    return build, inputs


def _segmentation(fn_name, **kw):
    def build():
        return getattr(tv.models.segmentation, fn_name)(weights=None, weights_backbone=None,
                                                       num_classes=3, **kw)
    return build, _images(64)


def _detection(fn_name, size=96, **kw):
    def build():
        return getattr(tv.models.detection, fn_name)(weights=None, weights_backbone=None,
                                                    num_classes=3, **kw)

    def inputs(gen, train):
        imgs = [torch.rand(3, size, size, generator=gen) for _ in range(B)]
        if not train:
            return (imgs,), {}
        targets = []
        for _ in range(B):
            xy = torch.rand(2, 2, generator=gen) * size / 2
            wh = torch.rand(2, 2, generator=gen) * size / 2 + 8
            boxes = torch.cat([xy, xy + wh], dim=1)
            t = {"boxes": boxes, "labels": torch.randint(1, 3, (2,), generator=gen)}
            if "mask" in fn_name:
                t["masks"] = torch.rand(2, size, size, generator=gen) > 0.5
            if "keypoint" in fn_name:
                t["keypoints"] = torch.cat([boxes[:, None, :2].expand(2, 17, 2),
                                            torch.ones(2, 17, 1)], dim=2)
            targets.append(t)
        return (imgs, targets), {}
    return build, inputs


def _flow(fn_name):
    def build():
        return getattr(tv.models.optical_flow, fn_name)(weights=None)

    def inputs(gen, train):
        return (image(gen, 128, b=1), image(gen, 128, b=1)), {"num_flow_updates": 2}
    return build, inputs


def _tv_maxvit():
    def build():
        return tv.models.MaxVit(input_size=(32, 32), stem_channels=16, partition_size=2,
                                block_channels=[16, 32], block_layers=[1, 1], head_dim=8,
                                stochastic_depth_prob=0.0, num_classes=10)
    return build, _images(32)


def _tv_vit():
    def build():
        return tv.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                           hidden_dim=32, mlp_dim=64, num_classes=10)
    return build, _images(32)


TORCHVISION = {
    "tv_resnet18": ("cnn", *_tv("resnet18", num_classes=10)),
    "tv_mobilenet_v3": ("cnn", *_tv("mobilenet_v3_small", num_classes=10)),
    "tv_efficientnet": ("cnn", *_tv("efficientnet_b0", num_classes=10)),
    "tv_shufflenet": ("cnn", *_tv("shufflenet_v2_x0_5", num_classes=10)),
    "tv_squeezenet": ("cnn", *_tv("squeezenet1_1", 64, num_classes=10)),
    "tv_regnet": ("cnn", *_tv("regnet_y_400mf", num_classes=10)),
    "tv_googlenet": ("cnn", *_tv("googlenet", 64, num_classes=10, aux_logits=False, init_weights=False)),
    "tv_vit": ("vit", *_tv_vit()),
    "tv_swin": ("vit", *_tv("swin_t", 64, num_classes=10)),
    "tv_maxvit": ("vit", *_tv_maxvit()),
    "tv_r3d": ("video", *_video("r3d_18", num_classes=10)),
    "tv_swin3d": ("video", *_video("swin3d_t", num_classes=10)),
    "tv_deeplab": ("segmentation", *_segmentation("deeplabv3_mobilenet_v3_large")),
    "tv_lraspp": ("segmentation", *_segmentation("lraspp_mobilenet_v3_large")),
    "tv_fasterrcnn": ("detection", *_detection("fasterrcnn_mobilenet_v3_large_320_fpn", min_size=96,
                                               max_size=96)),
    "tv_retinanet": ("detection", *_detection("retinanet_resnet50_fpn", min_size=96, max_size=96)),
    "tv_ssdlite": ("detection", *_detection("ssdlite320_mobilenet_v3_large", size=96)),
    "tv_maskrcnn": ("detection", *_detection("maskrcnn_resnet50_fpn", min_size=96, max_size=96)),
    "tv_raft": ("optical_flow", *_flow("raft_small")),
}

# ---- diffusers --------------------------------------------------------------------------------


def _unet2d():
    def build():
        return diffusers.UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                                     block_out_channels=(32, 64), norm_num_groups=8,
                                     down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                     up_block_types=("AttnUpBlock2D", "UpBlock2D"))

    def inputs(gen, train):
        return (image(gen, 16), torch.tensor([10, 500])), {"return_dict": False}
    return build, inputs


def _unet_cond():
    def build():
        return diffusers.UNet2DConditionModel(
            sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
            block_out_channels=(32, 64), norm_num_groups=8, cross_attention_dim=32,
            attention_head_dim=8,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))

    def inputs(gen, train):
        return (image(gen, 16, ch=4), torch.tensor([10, 500]),
                torch.randn(B, 7, 32, generator=gen)), {"return_dict": False}
    return build, inputs


def _vae():
    def build():
        return diffusers.AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(32, 64),
                                       down_block_types=("DownEncoderBlock2D",) * 2,
                                       up_block_types=("UpDecoderBlock2D",) * 2,
                                       latent_channels=4, norm_num_groups=8, layers_per_block=1)

    def inputs(gen, train):
        return (image(gen, 32),), {"sample_posterior": False, "return_dict": False}
    return build, inputs


def _dit():
    def build():
        return diffusers.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                               num_layers=2, sample_size=8, patch_size=2,
                                               norm_num_groups=8, num_embeds_ada_norm=1000)

    def inputs(gen, train):
        return (image(gen, 8, ch=4),), {"timestep": torch.tensor([10, 500]),
                                         "class_labels": torch.tensor([1, 2]), "return_dict": False}
    return build, inputs


def _sd3():
    def build():
        return diffusers.SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=2,
                                               attention_head_dim=16, num_attention_heads=2,
                                               joint_attention_dim=32, caption_projection_dim=32,
                                               pooled_projection_dim=16, out_channels=4, pos_embed_max_size=16)

    def inputs(gen, train):
        return (image(gen, 8, ch=4),), {"encoder_hidden_states": torch.randn(B, 5, 32, generator=gen),
                                         "pooled_projections": torch.randn(B, 16, generator=gen),
                                         "timestep": torch.tensor([10, 500]), "return_dict": False}
    return build, inputs


class SamplingLoop(torch.nn.Module):
    """A scheduler's denoising loop around a small UNet, as a pipeline's __call__ runs it:
    `scheduler.scale_model_input`, the UNet, `scheduler.step`, for a few timesteps."""

    def __init__(self, scheduler_cls, steps=3):
        super().__init__()
        self.unet = _unet2d()[0]()
        self.scheduler = scheduler_cls(num_train_timesteps=1000)
        self.steps = steps

    def forward(self, sample):
        self.scheduler.set_timesteps(self.steps)
        for t in self.scheduler.timesteps:
            model_in = self.scheduler.scale_model_input(sample, t)
            noise = self.unet(model_in, t, return_dict=False)[0]
            sample = self.scheduler.step(noise, t, sample, return_dict=False)[0]
        return sample


def _loop(scheduler_name):
    def build():
        return SamplingLoop(getattr(diffusers, scheduler_name))

    def inputs(gen, train):
        return (image(gen, 16),), {}
    return build, inputs


DIFFUSERS = {
    "diffusers_unet2d": ("unet", *_unet2d()),
    "diffusers_unet_cond": ("unet", *_unet_cond()),
    "diffusers_vae": ("vae", *_vae()),
    "diffusers_dit": ("dit", *_dit()),
    "diffusers_sd3": ("dit", *_sd3()),
    "diffusers_ddim_loop": ("sampling", *_loop("DDIMScheduler")),
    "diffusers_euler_loop": ("sampling", *_loop("EulerDiscreteScheduler")),
}


def vision_specs():
    """name -> (library, family, build, inputs, train_ok), for the libraries that import."""
    out = {}
    for lib, mod, table in (("timm", timm, TIMM), ("torchvision", tv, TORCHVISION),
                            ("diffusers", diffusers, DIFFUSERS)):
        if mod is None:
            continue
        for name, (family, build, inputs) in table.items():
            train_ok = family not in ("sampling",)
            out[name] = (lib, family, build, inputs, train_ok)
    return out
