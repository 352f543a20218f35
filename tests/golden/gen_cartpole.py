"""Golden transitions of CartPole-v1 for tests/unit/test_cartpole.c.

An independent NumPy implementation of the step of gym's CartPole-v1
(gymnasium/envs/classic_control/cartpole.py: Euler integration, its
constants, its termination test), in float64 as gym computes it, written the
way gym writes it: one environment at a time.

Writes tests/golden/data/cartpole/ (no cases.txt: the conformance runner
does not read this family; the unit test does):
  states.npy       f64[N, 4]   x, x_dot, theta, theta_dot
  actions.npy      i32[N]      0 (push left) or 1 (push right)
  next_states.npy  f64[N, 4]
  rewards.npy      f64[N]      1 on every step, the terminating one included
  terminated.npy   bool[N]     |x| > 2.4 or |theta| > 12 degrees after the step
  traj_start.npy   f64[B, 4]   B episodes' starting states (reset range)
  traj_actions.npy i32[B, L]   their actions
  traj_states.npy  f64[B, L+1, 4]  the states visited (the physics keeps going
                                   after termination, as the step does)

Run from the repository root:  python3 tests/golden/gen_cartpole.py
"""
import math
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "cartpole")


class CartPole:
    """gym's constants and step, for one environment."""

    gravity = 9.8
    masscart = 1.0
    masspole = 0.1
    total_mass = masspole + masscart
    length = 0.5  # half the pole's length
    polemass_length = masspole * length
    force_mag = 10.0
    tau = 0.02
    theta_threshold_radians = 12 * 2 * math.pi / 360
    x_threshold = 2.4

    def step(self, state, action):
        x, x_dot, theta, theta_dot = (float(v) for v in state)
        force = self.force_mag if action == 1 else -self.force_mag
        costheta = math.cos(theta)
        sintheta = math.sin(theta)
        temp = (force + self.polemass_length * theta_dot**2 * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta**2 / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        terminated = bool(x < -self.x_threshold or x > self.x_threshold
                          or theta < -self.theta_threshold_radians
                          or theta > self.theta_threshold_radians)
        return np.array([x, x_dot, theta, theta_dot]), 1.0, terminated


def near_threshold(env, s, margin=1e-4):
    """Whether a state lies so close to a termination threshold that f32
    rounding could decide it (the test also runs the step in f32)."""
    return (abs(abs(s[0]) - env.x_threshold) < margin
            or abs(abs(s[2]) - env.theta_threshold_radians) < margin)


def main():
    rng = np.random.default_rng(20240611)
    env = CartPole()
    states, actions, nexts, rewards, terms = [], [], [], [], []
    # states from resets, from the middle of episodes, and beyond the limits
    scales = [np.array([0.05] * 4)] * 64 + [np.array([2.0, 2.0, 0.2, 2.0])] * 128 + \
             [np.array([3.0, 4.0, 0.4, 4.0])] * 64
    for scale in scales:
        while True:
            s = rng.uniform(-1, 1, 4) * scale
            a = int(rng.integers(0, 2))
            n, r, t = env.step(s, a)
            if not near_threshold(env, n):
                break
        states.append(s)
        actions.append(a)
        nexts.append(n)
        rewards.append(r)
        terms.append(t)

    B, L = 8, 60
    starts = rng.uniform(-0.05, 0.05, (B, 4))
    traj_actions = rng.integers(0, 2, (B, L)).astype(np.int32)
    traj = np.zeros((B, L + 1, 4))
    for b in range(B):
        traj[b, 0] = starts[b]
        for k in range(L):
            traj[b, k + 1], _, _ = env.step(traj[b, k], traj_actions[b, k])

    os.makedirs(OUT, exist_ok=True)
    files = {
        "states": np.array(states, np.float64),
        "actions": np.array(actions, np.int32),
        "next_states": np.array(nexts, np.float64),
        "rewards": np.array(rewards, np.float64),
        "terminated": np.array(terms, np.bool_),
        "traj_start": starts,
        "traj_actions": traj_actions,
        "traj_states": traj,
    }
    for name, a in files.items():
        np.save(os.path.join(OUT, name + ".npy"), a)
    print(f"wrote {len(states)} transitions ({int(np.sum(terms))} terminating) and "
          f"{B} trajectories of {L} steps to {OUT}")


if __name__ == "__main__":
    main()
