"""The likelihood behind gp_interval: stationary kernels over training progress, the coregionalised covariance of
two residual trajectories, its Gaussian log-likelihood, score and expected information (batched over parameter
points). Derivatives of the covariance are (2 x 2 coefficients) (x) (K or dK), so everything works on m x m blocks.
"""

from __future__ import annotations

import math

import numpy as np

JITTER = 1e-9


# ----------------------------------------------------------------------------- kernels (value, d/dlog ell)


def _se(d, ell):
    r2 = (d / ell) ** 2
    k = np.exp(-0.5 * r2)
    return k, k * r2


def _matern32(d, ell):
    r = math.sqrt(3.0) * d / ell
    e = np.exp(-r)
    return (1 + r) * e, r * r * e


def _exp(d, ell):
    r = d / ell
    e = np.exp(-r)
    return e, r * e


KERNELS = {"se": _se, "matern32": _matern32, "exp": _exp}
# kernel="auto" takes the better fit of these at rho = 0: smooth (squared exponential) or rough (exponential,
# the continuous-time AR(1)); a smooth kernel fitted to a rough trajectory over-counts independent checkpoints
KERNEL_CHOICE = ("se", "exp")
KERNEL = "matern32"  # the default: see gp_interval


# ----------------------------------------------------------------------------- the likelihood, batched


def _kernel_mats(s: dict, ell: np.ndarray, kernel: str):
    """K = Q'R(ell)Q and dK/dlog ell, batched over ell (G,) -> (G, m, m)."""
    k, dk = KERNELS[kernel](s["d"][None], ell[:, None, None])
    Q = s["Q"]
    return Q.T @ k @ Q, Q.T @ dk @ Q


def _sigma(s, sa2, sb2, cab, K):
    """Sigma (G, 2m, 2m) = [[sa2 K + Na, cab K + C], [cab K + C, sb2 K + Nb]]."""
    m = s["m"]
    S = np.empty((len(sa2), 2 * m, 2 * m))
    S[:, :m, :m] = sa2[:, None, None] * K + s["Na"]
    S[:, m:, m:] = sb2[:, None, None] * K + s["Nb"]
    S[:, :m, m:] = cab[:, None, None] * K + s["C"]
    S[:, m:, :m] = np.swapaxes(S[:, :m, m:], 1, 2)
    return S


def _coefs(sa2, sb2, rho, with_z=False):
    """The derivatives of Sigma are (2 x 2 coefficients) (x) (K or dK/dlog ell): [(C (G, 2, 2), uses_dK)] for
    log sa2, log sb2, log ell (and atanh rho)."""
    sa, sb = np.sqrt(sa2), np.sqrt(sb2)
    cab, h, z0 = rho * sa * sb, 0.5 * rho * sa * sb, np.zeros_like(sa2)
    mats = [
        (np.stack([np.stack([sa2, h], -1), np.stack([h, z0], -1)], -2), False),
        (np.stack([np.stack([z0, h], -1), np.stack([h, sb2], -1)], -2), False),
        (np.stack([np.stack([sa2, cab], -1), np.stack([cab, sb2], -1)], -2), True),
    ]
    if with_z:
        e = (1 - rho * rho) * sa * sb
        mats.append((np.stack([np.stack([z0, e], -1), np.stack([e, z0], -1)], -2), False))
    return mats


def _score_info(Si, a, K, dK, coefs, m):
    """Gradient 1/2 (a'D_p a - tr(Si D_p)) and expected information 1/2 tr(Si D_p Si D_q) for D_p = C_p (x) M_p,
    from the m x m blocks of Si M (8 batched m x m products instead of 2m x 2m ones)."""
    blk = [[Si[:, i * m : (i + 1) * m, j * m : (j + 1) * m] for j in range(2)] for i in range(2)]
    XK = [[blk[i][j] @ K for j in range(2)] for i in range(2)]
    XdK = [[blk[i][j] @ dK for j in range(2)] for i in range(2)] if dK is not None else None
    ab = [a[:, :m], a[:, m:]]
    Ka = [np.einsum("gij,gj->gi", K, v) for v in ab]
    dKa = [np.einsum("gij,gj->gi", dK, v) for v in ab] if dK is not None else None
    P = len(coefs)
    g = np.zeros((len(a), P))
    T = []
    for p, (C, uses_dk) in enumerate(coefs):
        X, Ma = (XdK, dKa) if uses_dk else (XK, Ka)
        # (Si D_p)_{il} = sum_j C[j, l] X_{ij}
        Tp = [[C[:, 0, l, None, None] * X[i][0] + C[:, 1, l, None, None] * X[i][1] for l in range(2)] for i in range(2)]
        T.append(Tp)
        quad = sum(C[:, j, l] * np.einsum("gi,gi->g", ab[j], Ma[l]) for j in range(2) for l in range(2))
        tr = np.trace(Tp[0][0], axis1=1, axis2=2) + np.trace(Tp[1][1], axis1=1, axis2=2)
        g[:, p] = 0.5 * (quad - tr)
    info = np.zeros((len(a), P, P))
    for p in range(P):
        for q in range(p, P):
            v = 0.5 * sum((T[p][i][l] * np.swapaxes(T[q][l][i], 1, 2)).sum((1, 2)) for i in range(2) for l in range(2))
            info[:, p, q] = v
            info[:, q, p] = v
    return g, info


def _loglik_and_score(seeds, theta, rho, kernel, want_derivs=True):
    """Sum over seeds of the Gaussian log-likelihood, its gradient and expected information in theta: (G, 3)
    (log sa2, log sb2, log ell) at fixed rho (G,), or (G, 4) with atanh(rho) as a fourth parameter (rho=None)."""
    G, P = theta.shape
    ll = np.zeros(G)
    g = np.zeros((G, P))
    info = np.zeros((G, P, P))
    ell = np.exp(theta[:, 2])
    sa2, sb2 = np.exp(theta[:, 0]), np.exp(theta[:, 1])
    rho = np.tanh(theta[:, 3]) if rho is None else rho
    cab = rho * np.sqrt(sa2 * sb2)
    coefs = _coefs(sa2, sb2, rho, with_z=P == 4) if want_derivs else None
    for s in seeds:
        K, dK = _kernel_mats(s, ell, kernel)
        S = _sigma(s, sa2, sb2, cab, K)
        S = S + JITTER * np.trace(S, axis1=1, axis2=2)[:, None, None] / S.shape[1] * np.eye(S.shape[1])
        L = np.linalg.cholesky(S)
        logdet = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(-1)
        Si = np.linalg.inv(S)
        a = Si @ s["z"]
        ll += -0.5 * (logdet + np.einsum("gi,i->g", a, s["z"]) + len(s["z"]) * math.log(2 * math.pi))
        if want_derivs:
            gs, inf = _score_info(Si, a, K, dK, coefs, s["m"])
            g += gs
            info += inf
    return ll, g, info
