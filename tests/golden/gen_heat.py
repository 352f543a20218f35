"""Golden data for the heat simulator of examples/heat.c (tests/unit/test_heat.c).

A NumPy reference of the step, written as the formula of examples/heat.h:

  u' = u + r * (kxa * (u[i+1] - u) - kxb * (u - u[i-1])
              + kya * (u[j+1] - u) - kyb * (u - u[j-1]))

with u = 0 outside the grid, and the face diffusivities the mean of the two
cells' kappa, kappa extended outward by its edge value.

Writes tests/golden/data/heat/ (float64):
  u0.npy         [B, N, N]          initial states
  kappa.npy      [N, N]             a diffusivity field
  snapshots.npy  [NOBS, B, N, N]    u after STEPS, 2*STEPS, ... NOBS*STEPS steps

The sizes below are test_heat.c's GOLDEN config: keep them in sync.
Run from the repository root:  python3 tests/golden/gen_heat.py
"""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "heat")
N, B, STEPS, NOBS, R = 16, 2, 4, 3, 0.1


def faces(kappa):
    """(before, after) face diffusivities along rows, then along columns."""
    out = []
    for axis in (0, 1):
        pad = [(0, 0), (0, 0)]
        pad[axis] = (1, 1)
        kp = np.pad(kappa, pad, mode="edge")
        m = kp.shape[axis]
        kf = (np.take(kp, range(0, m - 1), axis) + np.take(kp, range(1, m), axis)) * 0.5
        out += [np.take(kf, range(0, m - 2), axis), np.take(kf, range(1, m - 1), axis)]
    return out


def step(u, k, r):
    div = []
    for d, (kb, ka) in ((1, k[0:2]), (2, k[2:4])):
        pad = [(0, 0)] * 3
        pad[d] = (1, 1)
        up = np.pad(u, pad)  # zeros outside: u = 0 on the boundary
        m = up.shape[d]
        prev, nxt = np.take(up, range(0, m - 2), d), np.take(up, range(2, m), d)
        div.append(ka * (nxt - u) - kb * (u - prev))
    return u + r * (div[0] + div[1])


def rollout(u0, kappa, steps, nobs, r):
    k = faces(kappa)
    u, snaps = u0, []
    for _ in range(nobs):
        for _ in range(steps):
            u = step(u, k, r)
        snaps.append(u)
    return np.stack(snaps)


def main():
    rng = np.random.default_rng(10)
    x = (np.arange(N) + 0.5) / N
    # smooth initial states, zero on the boundary, plus a little roughness
    u0 = np.stack([np.outer(np.sin(np.pi * (b + 1) * x), np.sin(np.pi * (b + 2) * x))
                   for b in range(B)]) + 0.1 * rng.standard_normal((B, N, N))
    # a positive, uneven field: r * max(kappa) stays below 1/4
    kappa = 0.5 + 1.5 * rng.uniform(size=(N, N))
    snaps = rollout(u0, kappa, STEPS, NOBS, R)
    os.makedirs(OUT, exist_ok=True)
    np.save(os.path.join(OUT, "u0.npy"), u0)
    np.save(os.path.join(OUT, "kappa.npy"), kappa)
    np.save(os.path.join(OUT, "snapshots.npy"), snaps)


if __name__ == "__main__":
    main()
