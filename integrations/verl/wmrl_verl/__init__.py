"""WMRL inside verl: the ``wmrl`` reward manager (real execution of the anchor groups and of
validation, in verl's reward loop), the ``wmrl`` advantage estimator (calibration and fusion) and
the ``wmrl`` trainer that connects them (anchor draw, one world-model call per batch). Importing
the package registers the reward manager and the estimator name with verl;
:func:`wmrl_verl.registration.register` registers all three, in any process."""

from wmrl_verl.estimator import FIELDS, WMRLAdvantageEstimator
from wmrl_verl.registration import register, with_worker_registration, wmrl_advantage
from wmrl_verl.reward_manager import WMRLRewardManager

__all__ = [
    "FIELDS",
    "WMRLAdvantageEstimator",
    "WMRLRewardManager",
    "register",
    "wmrl_advantage",
    "with_worker_registration",
]
