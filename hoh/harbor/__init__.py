"""hoh as a Harbor agent: `harbor run ... --agent hoh.harbor:HohAgent` (see README.md here).

Needs Harbor (`pip install 'hoh[harbor]'`, Python >= 3.12). hoh's Runtime runs in the Harbor process;
only the roles' CLIs run in the task's environment (through hoh.envs).
"""

try:
    import harbor  # noqa: F401
except ImportError:
    raise ImportError("hoh.harbor needs Harbor: pip install 'hoh[harbor]' (Python >= 3.12)") from None

from .agent import HohAgent, HohAgentOptions
from .candidate import CandidateAgent, CandidateOptions

__all__ = ["CandidateAgent", "CandidateOptions", "HohAgent", "HohAgentOptions"]
