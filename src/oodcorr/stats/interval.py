"""The noise-corrected interval (ci2) for the partial correlation of two NOISE-FREE trajectories.

Estimand: the partial correlation, across checkpoints, of two testsets' population-level scores (infinitely
many items of the same kind) given the population-level ID score. What is observed: per checkpoint t the mean
over a finite, fixed testset of per-item scores (any metric that is a mean of per-item scores within gold-label
strata: accuracy, mean margin, the label-balanced margin, ...). Three things separate the observed partial r
from the estimand, and each has its own correction here:

1. Item noise in the two OOD series (attenuation). Its covariance over checkpoints is estimated from the items
   themselves: the testset mean is a mean of I draws from the item population, so its sampling covariance is
   V = C / I with C the covariance of the items' score trajectories (within each gold-label stratum when labels
   are given: V = sum_c (I_c/I)^2 C_c / I_c; a per-checkpoint answer bias is constant within a stratum and so
   is not counted as noise). The same items are scored at every checkpoint, so V is a full (n x n) matrix:
   persistent item effects are part of it. tr(M V) is the noise part of a residual sum of squares (the
   all-splits average of a Rulon split-half estimate; Cronbach's alpha of the residualised items).
2. Item noise in the ID control (errors in variables). Residualising on a noisy ID series leaves part of the
   ID trend in both residuals (a spurious common component). The moment correction subtracts the noise
   covariances from the checkpoint covariance matrix of (ID, A, B) before partialling:
       S* = S - diag(N_id, N_a, N_b),  N_j = tr(J V_j J)  (J centres)
       r_hat = S*_ab.id / sqrt(S*_aa.id S*_bb.id),  S*_ab.id = S*_ab - S*_a,id S*_b,id / S*_id,id
   which is the disattenuated partial r with the ID slope corrected for attenuation (a method-of-moments
   errors-in-variables estimator). Without the ID correction (eiv=False) this is r / sqrt(rel_a rel_b).
3. Autocorrelated checkpoints (fine-tuning trajectories are smooth): checkpoints are not independent, so
   1/sqrt(n - 3 - k) understates the standard error. Each residual series is modelled as an AR(1) signal plus
   the measured item noise V: the signal's phi is solved from the observed lag-1 autocovariance of the residual
   (expectations taken through the residual maker M, which removes the downward bias of a residual
   autocorrelation in short series), and the null variance of the residual correlation is the exact quadratic-
   form expression (Dutilleul 1993, the Bartlett sum for short series):
       var0 = [tr(M S_a M S_b) + tr(M S_ab M S_ab)] / (tr(M S_a) tr(M S_b)),
       S_j = s_j^2 R(phi_j) + V_j + beta_j^2 V_id,  S_ab = beta_a beta_b V_id (the shared ID noise)
   n_eff = 1/var0 + 1 + k (= n for independent checkpoints), se_z(observed) = 1 / sqrt(n_eff - 3 - k).
   Matching expectations through M makes the phi estimate nearly unbiased in short residual series (simulated:
   0.75-0.81 for a true 0.8 at 20-63 checkpoints); PHI_Z > 0 would move it up by that many large-sample standard
   errors (sqrt((1 - phi^2) / n)), a knob the coverage grid did not need.
   Away from the null the same delta method with the signal cross-covariance plugged in (z_dof) gives the
   variance of atanh(r): with item noise a strong correlation's z varies less than the null n_eff says.

Interval: the Fisher interval of the attenuated correlation r_att = A * r_hat (A = sqrt(rel_a rel_b), rel_j the
share of the residual variance that is not item noise), atanh(r_att) +/- z * se_z with se_z = 1/sqrt(n_eff - 3 - k),
each end divided by A (Fisher's transform stabilises the variance of the attenuated r, not of r_hat). Where an
end passes +/-1 the interval becomes one-sided at that boundary (disattenuated_bounds): never zero width. Undefined
(NaN, with a reason) where the effective sample is too small for any inference (n_eff - 3 - k < NEFF_MIN), a
corrected residual variance is <= 0 (the trajectory is noise), or the ID series carries no signal beyond its noise.
Coverage over a grid of simulated designs: bench/stats/noise_simulation.py (docs/statistics-reference.md).
"""

from __future__ import annotations

import numpy as np

PHI_MAX = 0.97  # AR(1) grid upper end
PHI_GRID = np.linspace(0.0, PHI_MAX, 98)
PHI_Z = 0.0  # phi used = estimate + PHI_Z * se (0: the bias-corrected point estimate)
NEFF_MIN = 2.0  # n_eff - 3 - k below this: undefined (the Fisher z variance is not a usable approximation)
R_CLIP = 0.995  # |r_hat| cap before atanh (a disattenuated r can overshoot 1 by noise)


# ----------------------------------------------------------------------------- autocorrelation


def ar1_corr(phi, n: int) -> np.ndarray:
    """(..., n, n) AR(1) correlation matrices phi^|i - j| for phi of any shape."""
    lag = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    phi = np.asarray(phi, float)[..., None, None]
    with np.errstate(invalid="ignore"):
        return np.where(lag == 0, 1.0, np.power(phi, lag))


def _lag1(n: int) -> np.ndarray:
    L = np.zeros((n, n))
    i = np.arange(n - 1)
    L[i, i + 1] = L[i + 1, i] = 0.5
    return L


def residual_maker(x: np.ndarray) -> np.ndarray:
    """(..., n, n) I - H of OLS on [1, x] (batched over leading axes of x (..., n))."""
    n = x.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    sxx = (xc**2).sum(axis=-1)[..., None, None]
    with np.errstate(invalid="ignore", divide="ignore"):
        H = np.full((n, n), 1.0 / n) + xc[..., :, None] * xc[..., None, :] / sxx
    return np.eye(n) - H


def fit_ar1(e: np.ndarray, M: np.ndarray, V: np.ndarray, phi_z: float = PHI_Z):
    """AR(1) signal model of residual series e (..., n) = M (signal + noise), noise covariance V (..., n, n).

    Returns (phi, s2): the signal's lag-1 autocorrelation whose expected lag-1 / lag-0 residual quadratic forms
    match the observed ones (E e'Le = s2 tr(M L M R) + tr(M L M V), E e'e = s2 tr(M R) + tr(M V)), moved up by
    phi_z large-sample standard errors; s2 (signal variance) from the lag-0 equation at that phi."""
    n = e.shape[-1]
    L = _lag1(n)
    R = ar1_corr(PHI_GRID, n)  # (g, n, n)
    MLM = M @ L @ M
    q0 = (e * e).sum(-1)
    q1 = np.einsum("...i,ij,...j->...", e, L, e)
    v0 = np.einsum("...ij,...ji->...", M, V)
    v1 = np.einsum("...ij,...ji->...", MLM, V)
    t0 = np.einsum("...ij,gij->...g", M, R)  # tr(M R_g) (M symmetric)
    t1 = np.einsum("...ij,gij->...g", MLM, R)
    s2 = (q0 - v0)[..., None] / t0
    pred = s2 * t1 + v1[..., None]  # expected e'Le at each phi
    gap = pred - q1[..., None]
    # the first grid point where the prediction reaches the observation (pred rises with phi); interpolate
    above = gap >= 0
    first = np.where(above.any(-1), above.argmax(-1), len(PHI_GRID) - 1)
    lo = np.clip(first - 1, 0, None)
    g_lo = np.take_along_axis(gap, lo[..., None], -1)[..., 0]
    g_hi = np.take_along_axis(gap, first[..., None], -1)[..., 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where((first > 0) & (g_hi != g_lo), -g_lo / (g_hi - g_lo), 0.0)
    phi = PHI_GRID[lo] + np.clip(w, 0, 1) * (PHI_GRID[first] - PHI_GRID[lo])
    phi = np.where(above[..., 0], 0.0, phi)  # observed lag-1 at or below the phi = 0 prediction
    n_eff_phi = np.maximum(n - 2, 1)
    phi = np.clip(phi + phi_z * np.sqrt(np.clip(1 - phi**2, 0, None) / n_eff_phi), 0.0, PHI_MAX)
    Rp = ar1_corr(phi, n)
    s2 = (q0 - v0) / np.einsum("...ij,...ji->...", M, Rp)
    return phi, s2


# ----------------------------------------------------------------------------- the interval


def _tr(A, B):
    return np.einsum("...ij,...ji->...", A, B)


def disattenuated_bounds(r_att, A, se_z, alpha: float = 0.05):
    """Fisher interval atanh(r_att) +/- z_(1 - alpha/2) se_z of the attenuated correlation r_att = A * r_hat, each
    end divided by A. Where the divided interval excludes 0 and reaches past +1 (-1) -- a strong correlation
    measured with noise -- the far end is the boundary itself, so the interval is one-sided: [lower 1 - alpha
    bound, 1] ([-1, upper bound]); its coverage is then 1 - alpha, not 1 - alpha/2. (Only then: switching where
    the two-sided interval includes 0 would change the test of 0 and raise its false-positive rate.) When even that
    bound is past the boundary (the reliabilities look too low for the observed r), the undivided bound is used
    (A <= 1, so it is still a valid, wider bound): never a zero-width interval."""
    from scipy.stats import norm

    z2, z1 = norm.ppf(1 - alpha / 2), norm.ppf(1 - alpha)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.arctanh(np.clip(r_att, -R_CLIP, R_CLIP))
        lo2, hi2 = np.tanh(z - z2 * se_z) / A, np.tanh(z + z2 * se_z) / A
        up, down = (hi2 >= 1) & (lo2 > 0), (lo2 <= -1) & (hi2 < 0)  # one-sided only when 0 is excluded anyway
        one_lo, one_hi = np.tanh(z - z1 * se_z), np.tanh(z + z1 * se_z)  # one-sided bounds (attenuated)
        lo = np.where(up & ~down, np.where(one_lo / A < 1, one_lo / A, one_lo), np.clip(lo2, -1, 1))
        hi = np.where(down & ~up, np.where(one_hi / A > -1, one_hi / A, one_hi), np.clip(hi2, -1, 1))
    return lo, hi


def z_dof(M, Sa, Sb, Sab):
    """1 / var(atanh r) - 2 for the correlation r of the residuals e_a = M y_a, e_b = M y_b of Gaussian series with
    covariances Sa, Sb and cross-covariance Sab (..., n, n): the delta method on r = c / sqrt(v_a v_b) with the
    exact moments of the quadratic forms c = e_a'e_b, v_j = e_j'e_j (cov(e'Ae, e'Be) = 2 tr(A S B S)). For
    independent checkpoints and no noise it is n - 2 - 2 = n - 4, Fisher's n - 3 - k with k = 1; the "- 2" keeps
    that small-sample correction. Under the null (Sab = 0) it is the Dutilleul / Bartlett effective sample."""
    A_, B_, C_ = M @ Sa @ M, M @ Sb @ M, M @ Sab @ M
    Ct = np.swapaxes(C_, -1, -2)
    va, vb, c = _tr(M, A_), _tr(M, B_), _tr(M, C_)
    var_c = _tr(A_, B_) + _tr(C_, C_)
    var_a, var_b, cov_ab = 2 * _tr(A_, A_), 2 * _tr(B_, B_), 2 * _tr(C_, Ct)
    cov_ca, cov_cb = 2 * _tr(A_, C_), 2 * _tr(B_, Ct)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = c / np.sqrt(va * vb)
        var_r = (
            var_c / (va * vb)
            + r**2 * var_a / (4 * va**2)
            + r**2 * var_b / (4 * vb**2)
            - r * cov_ca / (va * np.sqrt(va * vb))
            - r * cov_cb / (vb * np.sqrt(va * vb))
            + r**2 * cov_ab / (2 * va * vb)
        )
        return (1 - r**2) ** 2 / var_r - 2


def _moments(x, ya, yb, Vx, Va, Vb, r_obs) -> dict:
    """The moment estimator of partial_interval: the noise-corrected slopes on ID (ba, bb), residual signal
    variances (caa, cbb), reliabilities (rel_id, rel_a, rel_b), attenuation A and the noise-free r (r_hat)."""
    n = x.shape[-1]
    J = np.eye(n) - 1.0 / n
    xc, ac, bc = (v - v.mean(-1, keepdims=True) for v in (x, ya, yb))
    Sxx, Sxa, Sxb = (xc * xc).sum(-1), (xc * ac).sum(-1), (xc * bc).sum(-1)
    Saa, Sbb, Sab = (ac * ac).sum(-1), (bc * bc).sum(-1), (ac * bc).sum(-1)
    Nx, Na, Nb = _tr(J, Vx), _tr(J, Va), _tr(J, Vb)
    with np.errstate(invalid="ignore", divide="ignore"):
        Sxx_t = Sxx - Nx
        rel_id = Sxx_t / Sxx
        ba, bb = Sxa / Sxx_t, Sxb / Sxx_t
        caa = Saa - Na - Sxa**2 / Sxx_t
        cbb = Sbb - Nb - Sxb**2 / Sxx_t
        cab = Sab - Sxa * Sxb / Sxx_t
        ea, eb = ac - ba[..., None] * xc, bc - bb[..., None] * xc  # residuals with the corrected slope
        Ea, Eb = (ea * ea).sum(-1), (eb * eb).sum(-1)
        rel_a, rel_b = caa / Ea, cbb / Eb
        A = np.sqrt(rel_a * rel_b)
        r_hat = cab / np.sqrt(caa * cbb)
        if r_obs is not None:  # NaN entries keep the moment estimator
            r_hat = np.where(np.isnan(r_obs), r_hat, np.asarray(r_obs, float) / A)
    return {
        "ba": ba,
        "bb": bb,
        "caa": caa,
        "cbb": cbb,
        "rel_id": rel_id,
        "rel_a": rel_a,
        "rel_b": rel_b,
        "A": A,
        "r_hat": r_hat,
    }


def _ar1_interval(x, ya, yb, V: tuple, m: dict, alpha: float, phi_z: float) -> tuple:
    """The interval around the moment estimate m["r_hat"]: each residual series' AR(1) signal plus its measured
    noise give the effective number of checkpoints (dof = n_eff - 3 - k) and the z standard error, disattenuated.
    Returns phi_a, phi_b, dof, n_eff, se, lo, hi."""
    Vx, Va, Vb = V
    ba, bb, A, r_hat = m["ba"], m["bb"], m["A"], m["r_hat"]
    n = x.shape[-1]
    # autocorrelation: AR(1) signal + measured noise per residual series (OLS residuals on observed x)
    M = residual_maker(x)
    ra = np.einsum("...ij,...j->...i", M, ya)
    rb = np.einsum("...ij,...j->...i", M, yb)
    with np.errstate(invalid="ignore", divide="ignore"):
        # the residual's noise: its own items' plus the ID items' carried in by the slope
        phi_a, s2a = fit_ar1(ra, M, Va + (ba**2)[..., None, None] * Vx, phi_z)
        phi_b, s2b = fit_ar1(rb, M, Vb + (bb**2)[..., None, None] * Vx, phi_z)
        Sa = np.clip(s2a, 0, None)[..., None, None] * ar1_corr(phi_a, n) + Va + (ba**2)[..., None, None] * Vx
        Sb = np.clip(s2b, 0, None)[..., None, None] * ar1_corr(phi_b, n) + Vb + (bb**2)[..., None, None] * Vx
        # the signal cross-correlation (plug-in), within what two AR(1) series with these phis can reach
        cap = np.sqrt((1 - phi_a**2) * (1 - phi_b**2)) / (1 - phi_a * phi_b)
        r_sig = np.clip(np.nan_to_num(r_hat), -0.95 * cap, 0.95 * cap)
        leak = (ba * bb)[..., None, None] * Vx
        signal = np.sqrt(np.clip(s2a, 0, None) * np.clip(s2b, 0, None))[..., None, None]
        signal = signal * ar1_corr(np.sqrt(phi_a * phi_b), n)
        # = n_eff - 3 - k; away from 0 the z variance shrinks with item noise, never grows (Fisher's transform
        # is variance-stabilising): the larger of the null and the plug-in alternative
        dof = np.fmax(z_dof(M, Sa, Sb, leak), z_dof(M, Sa, Sb, leak + r_sig[..., None, None] * signal))
        k = 1.0
        n_eff = dof + 3 + k
        se = 1 / np.sqrt(dof)
        lo, hi = disattenuated_bounds(r_hat * A, A, se, alpha)
    return phi_a, phi_b, dof, n_eff, se, lo, hi


def partial_interval(
    x,
    ya,
    yb,
    Vx,
    Va,
    Vb,
    alpha: float = 0.05,
    eiv: bool = True,
    r_obs=None,
    reliability_min: float = 0.0,
    phi_z: float = PHI_Z,
) -> dict:
    """Noise-corrected CI for the partial r of the noise-free (ya, yb) given the noise-free x (module notes).

    x, ya, yb: (..., n) observed series; Vx, Va, Vb: (..., n, n) their item-noise covariances (item_cov.noise_cov);
    Vx = 0 (or eiv=False) treats the control as exact. r_obs: for non-linear methods (rank, gam) the method's
    observed partial r, disattenuated here with this pair's reliabilities instead of the moment estimator
    (entries that are NaN keep the moment estimator).
    reliability_min: below it (rel_a or rel_b) the interval is undefined ("unreliable").
    Returns arrays: r_hat, ci_low, ci_high, se_z (of atanh of the attenuated r), n_eff, A, rel_a, rel_b, rel_id,
    phi_a, phi_b, reason ("" where the interval is defined)."""

    x, ya, yb = (np.asarray(v, float) for v in (x, ya, yb))
    Vx, Va, Vb = (np.asarray(v, float) for v in (Vx, Va, Vb))
    if not eiv:
        Vx = np.zeros_like(Vx)
    m = _moments(x, ya, yb, Vx, Va, Vb, r_obs)
    caa, cbb, rel_id, rel_a, rel_b, A, r_hat = (m[k] for k in ("caa", "cbb", "rel_id", "rel_a", "rel_b", "A", "r_hat"))
    phi_a, phi_b, dof, n_eff, se, lo, hi = _ar1_interval(x, ya, yb, (Vx, Va, Vb), m, alpha, phi_z)
    bad_id = ~(rel_id > 0)
    bad_rel = ~((caa > 0) & (cbb > 0) & np.isfinite(r_hat))
    reason = np.full(np.shape(r_hat), "", dtype=object)
    reason = np.where(~(dof >= NEFF_MIN), "few_effective_checkpoints", reason)
    reason = np.where(~((rel_a >= reliability_min) & (rel_b >= reliability_min)), "unreliable", reason)
    reason = np.where(bad_rel, "noise_only", reason)
    reason = np.where(bad_id, "id_noise_only", reason)
    ok = reason == ""
    return {
        "r_hat": np.where(bad_rel | bad_id, np.nan, r_hat),
        "ci_low": np.where(ok, lo, np.nan),
        "ci_high": np.where(ok, hi, np.nan),
        "se_z": np.where(ok, se, np.nan),
        "n_eff": n_eff,
        "A": A,
        "rel_a": rel_a,
        "rel_b": rel_b,
        "rel_id": rel_id,
        "phi_a": phi_a,
        "phi_b": phi_b,
        "reason": reason,
    }
