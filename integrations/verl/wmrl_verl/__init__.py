"""WMRL inside verl: the ``wmrl`` reward manager (world model on every trajectory, real
execution on hashed anchor groups) and the ``wmrl`` advantage estimator (calibration and fusion
on the driver), plus a v1 trainer subclass that connects them. Importing the package registers
the reward manager and the estimator name with verl."""

from wmrl_verl.estimator import FIELDS, WMRLAdvantageEstimator
from wmrl_verl.registration import wmrl_advantage
from wmrl_verl.reward_manager import WMRLRewardManager, is_anchor

__all__ = ["FIELDS", "WMRLAdvantageEstimator", "WMRLRewardManager", "is_anchor", "wmrl_advantage"]
