"""Golden values for jx's layers, initializers and losses (include/jx/nn.h),
checked by tests/unit/test_nn.c.

Each layer case is a directory tests/golden/data/nn/<case>/ holding the
parameters (p_<name>.npy, names listed in params.txt in tree order), the
input x.npy (and aux.npy: labels, a key or a target, not differentiated), a
cotangent r.npy, and from JAX: y.npy (the forward), loss.npy = sum(y * r),
g_<name>.npy and gx.npy (its gradients, jax.value_and_grad), and yb.npy, the
forward vmapped over xb.npy (a leading batch axis on x). The reference layers
below are written in plain JAX with the same math as src/nn. init/ holds
initializer draws from jax.nn.initializers for fixed keys, which jx must
reproduce bit for bit. No cases.txt: the conformance runner skips this
directory.

Run from the repository root:  python3 tests/golden/gen_nn.py
"""
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from common import ROOT, bfloat16

jax.config.update("jax_enable_x64", True)

OUT = os.path.join(ROOT, "nn")
F32_MIN = float(np.finfo(np.float32).min)


# ---- reference layers (the math of src/nn) ----

def dense(p, x, pre=""):
    y = lax.dot_general(x, p[pre + "w"], (((x.ndim - 1,), (0,)), ((), ())))
    return y + p[pre + "b"] if pre + "b" in p else y


def embedding(p, ids):
    return jnp.take(p["table"], ids, axis=0)


def norm(p, x, eps, rms, pre=""):
    dt = x.dtype
    xf = x.astype(jnp.float32) if dt in (jnp.bfloat16, jnp.float16) else x
    if rms:
        y = xf * lax.rsqrt(jnp.mean(jnp.square(xf), -1, keepdims=True) + eps)
    else:
        xc = xf - jnp.mean(xf, -1, keepdims=True)
        y = xc * lax.rsqrt(jnp.mean(jnp.square(xc), -1, keepdims=True) + eps)
    y = y * p[pre + "scale"]
    if not rms:
        y = y + p[pre + "bias"]
    return y.astype(dt)


def attention(p, x, heads, pre=""):
    shape = x.shape
    T, d = shape[-2], shape[-1]
    x3 = x.reshape(-1, T, d)
    n, dh = x3.shape[0], d // heads
    proj = lambda w, b, v: lax.dot_general(v, p[pre + w], (((2,), (0,)), ((), ()))) + p[pre + b]
    q = proj("wq", "bq", x3).reshape(n, T, heads, dh)
    k = proj("wk", "bk", x3).reshape(n, T, heads, dh)
    v = proj("wv", "bv", x3).reshape(n, T, heads, dh)
    s = lax.dot_general(q, k, (((3,), (3,)), ((0, 2), (0, 2))))
    s = s.astype(jnp.float32) * (1 / np.sqrt(dh))
    causal = lax.broadcasted_iota(jnp.int32, (T, T), 0) >= lax.broadcasted_iota(jnp.int32, (T, T), 1)
    s = jnp.where(causal, s, F32_MIN)
    pr = jax.nn.softmax(s, axis=3).astype(x.dtype)
    o = lax.dot_general(pr, v, (((3,), (1,)), ((0, 1), (0, 2))))
    o = o.transpose(0, 2, 1, 3).reshape(n, T, d)
    return proj("wo", "bo", o).reshape(shape)


def mlp(p, x, pre=""):
    h = jax.nn.gelu(dense(p, x, pre + "fc."), approximate=True)
    return dense(p, h, pre + "proj.")


def block(p, x, heads, eps, pre=""):
    x = x + attention(p, norm(p, x, eps, False, pre + "ln1."), heads, pre + "attn.")
    return x + mlp(p, norm(p, x, eps, False, pre + "ln2."), pre + "mlp.")


def conv2d(p, x, strides, padding):
    y = lax.conv_general_dilated(x, p["w"], strides, padding,
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return y + p["b"] if "b" in p else y


def pool(x, window, strides, padding, kind):
    dims, st = (1,) + window + (1,), (1,) + strides + (1,)
    if kind == "max":
        return lax.reduce_window(x, -jnp.inf, lax.max, dims, st, padding)
    return lax.reduce_window(x, 0.0, lax.add, dims, st, padding) / np.prod(window)


def dropout(key, x, rate):
    keep = 1.0 - rate
    # p as f32: the f32 uniforms JAX's default mode draws (jx's default mode)
    mask = jax.random.bernoulli(key, jnp.float32(keep), x.shape)
    return lax.select(mask, x / keep, jnp.zeros_like(x))


def xent(logits, labels, smoothing):
    if smoothing == 0:
        picked = jnp.take_along_axis(logits, labels[..., None], axis=-1)[..., 0]
        return jax.nn.logsumexp(logits, axis=-1) - picked
    c = logits.shape[-1]
    t = jax.nn.one_hot(labels, c, dtype=logits.dtype) * (1 - smoothing) + smoothing / c
    return -jnp.sum(t * jax.nn.log_softmax(logits, axis=-1), axis=-1)


# ---- writing ----

rng = np.random.default_rng(7)


def rand(shape, dt=np.float32, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(dt)


def save(d, name, a):
    np.save(os.path.join(d, name + ".npy"), np.asarray(a))


def case(name, fwd, params, x, aux=None, xdiff=True, batch=2):
    """fwd(params, x, aux) -> y; writes everything test_nn.c reads."""
    d = os.path.join(OUT, name)
    os.makedirs(d)
    params = {k: jnp.asarray(v) for k, v in params.items()}
    x = jnp.asarray(x)
    y = fwd(params, x, aux)
    r = jnp.asarray(rand(y.shape, np.float32)).astype(y.dtype)

    def loss(p, xx):
        return jnp.sum((fwd(p, xx, aux) * r).astype(jnp.float32))

    if xdiff:
        val, (gp, gx) = jax.value_and_grad(loss, argnums=(0, 1))(params, x)
        save(d, "gx", gx)
    else:
        val, gp = jax.value_and_grad(loss)(params, x)
    with open(os.path.join(d, "params.txt"), "w") as f:
        for k in params:
            f.write(k + "\n")
            save(d, "p_" + k, params[k])
            save(d, "g_" + k, gp[k])
    save(d, "x", x)
    if aux is not None:
        save(d, "aux", aux)
    save(d, "r", r)
    save(d, "y", y)
    save(d, "loss", np.float32(val))
    xb = jnp.stack([x] + [jnp.asarray(rand(x.shape, np.float32)).astype(x.dtype)
                          if jnp.issubdtype(x.dtype, jnp.floating)
                          else jnp.asarray(rng.integers(0, 10, x.shape).astype(x.dtype))
                          for _ in range(batch - 1)])
    save(d, "xb", xb)
    save(d, "yb", jax.vmap(lambda xx: fwd(params, xx, aux))(xb))


def attn_params(d, dt, scale=0.2, pre=""):
    p = {}
    for w in ("wq", "wk", "wv", "wo"):
        p[pre + w] = rand((d, d), dt, scale)
    for b in ("bq", "bk", "bv", "bo"):
        p[pre + b] = rand((d,), dt, 0.1)
    return p


def layer_cases():
    bf = bfloat16
    case("dense", lambda p, x, a: dense(p, x),
         {"w": rand((5, 4)), "b": rand((4,))}, rand((2, 3, 5)))
    case("dense_nobias", lambda p, x, a: dense(p, x), {"w": rand((5, 3))}, rand((4, 5)))
    case("dense_bf16", lambda p, x, a: dense(p, x),
         {"w": rand((8, 4), bf), "b": rand((4,), bf)}, rand((3, 8), bf))
    case("embedding", lambda p, x, a: embedding(p, x), {"table": rand((10, 4))},
         rng.integers(0, 10, (2, 3)).astype(np.int32), xdiff=False)
    ln = {"scale": 1 + rand((8,), scale=0.1), "bias": rand((8,), scale=0.1)}
    case("layer_norm", lambda p, x, a: norm(p, x, 1e-5, False), ln, rand((3, 8)))
    case("layer_norm_bf16", lambda p, x, a: norm(p, x, 1e-5, False),
         {k: v.astype(bf) for k, v in ln.items()}, rand((2, 3, 8), bf))
    case("rms_norm", lambda p, x, a: norm(p, x, 1e-6, True),
         {"scale": 1 + rand((8,), scale=0.1)}, rand((2, 3, 8)))
    case("attention", lambda p, x, a: attention(p, x, 4), attn_params(16, np.float32),
         rand((2, 6, 16)))
    case("attention_rank2", lambda p, x, a: attention(p, x, 2), attn_params(8, np.float32),
         rand((5, 8)))
    case("attention_bf16", lambda p, x, a: attention(p, x, 2), attn_params(8, bf),
         rand((2, 4, 8), bf))
    case("mlp", lambda p, x, a: mlp(p, x),
         {"fc.w": rand((8, 32), scale=0.3), "fc.b": rand((32,), scale=0.1),
          "proj.w": rand((32, 8), scale=0.3), "proj.b": rand((8,), scale=0.1)}, rand((2, 4, 8)))
    bp = {"ln1.scale": 1 + rand((16,), scale=0.1), "ln1.bias": rand((16,), scale=0.1)}
    bp.update(attn_params(16, np.float32, pre="attn."))
    bp.update({"ln2.scale": 1 + rand((16,), scale=0.1), "ln2.bias": rand((16,), scale=0.1),
               "mlp.fc.w": rand((16, 64), scale=0.2), "mlp.fc.b": rand((64,), scale=0.1),
               "mlp.proj.w": rand((64, 16), scale=0.2), "mlp.proj.b": rand((16,), scale=0.1)})
    case("block", lambda p, x, a: block(p, x, 4, 1e-5), bp, rand((2, 5, 16)))
    case("conv2d_same_s2", lambda p, x, a: conv2d(p, x, (2, 2), "SAME"),
         {"w": rand((3, 3, 3, 4), scale=0.3), "b": rand((4,))}, rand((2, 7, 7, 3)))
    case("conv2d_valid", lambda p, x, a: conv2d(p, x, (1, 1), "VALID"),
         {"w": rand((2, 3, 2, 3), scale=0.3), "b": rand((3,))}, rand((1, 5, 6, 2)))
    case("max_pool", lambda p, x, a: pool(x, (2, 2), (2, 2), "VALID", "max"), {},
         rand((2, 6, 6, 3)))
    case("avg_pool_same", lambda p, x, a: pool(x, (3, 3), (1, 1), "SAME", "avg"), {},
         rand((2, 5, 5, 2)))
    key = np.asarray(jax.random.key_data(jax.random.key(3)))
    case("dropout", lambda p, x, a: dropout(jnp.asarray(a), x, 0.3), {}, rand((4, 50)), aux=key)
    logits, labels = rand((6, 7), scale=2.0), rng.integers(0, 7, (6,)).astype(np.int32)
    case("xent", lambda p, x, a: xent(x, jnp.asarray(a), 0.0), {}, logits, aux=labels)
    case("xent_smooth", lambda p, x, a: xent(x, jnp.asarray(a), 0.1), {}, logits, aux=labels)
    case("xent_rank3", lambda p, x, a: xent(x, jnp.asarray(a), 0.0), {}, rand((2, 3, 5)),
         aux=rng.integers(0, 5, (2, 3)).astype(np.int32))
    case("mse", lambda p, x, a: jnp.mean(jnp.square(x - a)), {}, rand((3, 4)), aux=rand((3, 4)))
    case("accuracy", lambda p, x, a: jnp.mean((jnp.argmax(x, -1) == a).astype(jnp.float32)),
         {}, logits, aux=labels)


INITS = {
    "glorot_uniform": jax.nn.initializers.glorot_uniform(),
    "glorot_normal": jax.nn.initializers.glorot_normal(),
    "lecun_uniform": jax.nn.initializers.lecun_uniform(),
    "lecun_normal": jax.nn.initializers.lecun_normal(),
    "he_uniform": jax.nn.initializers.he_uniform(),
    "he_normal": jax.nn.initializers.he_normal(),
    "normal": jax.nn.initializers.normal(0.05),
    "truncated_normal": jax.nn.initializers.truncated_normal(0.05),
    "vs_fan_out_normal": jax.nn.initializers.variance_scaling(0.5, "fan_out", "normal"),
    "vs_fan_geo_avg_uniform": jax.nn.initializers.variance_scaling(3.0, "fan_geo_avg", "uniform"),
}


def init_cases():
    d = os.path.join(OUT, "init")
    os.makedirs(d)
    for i, (name, fn) in enumerate(INITS.items()):
        key = jax.random.key(100 + i)
        save(d, name + "_dense", fn(key, (64, 32), jnp.float32))
        save(d, name + "_conv", fn(key, (3, 3, 8, 16), jnp.float32))
        save(d, name + "_bf16", fn(key, (16, 8), jnp.bfloat16))


if __name__ == "__main__":
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    layer_cases()
    init_cases()
