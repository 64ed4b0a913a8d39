"""The fleet: replicas behind a router, with admission, autoscaling, cold starts, failures
and prices, simulated request by request over a day (:func:`fleet`; several pools, models and
regions: :func:`fleet_of`).

==========================  ==============================================================
module                      concept
==========================  ==============================================================
:mod:`.traffic`             request rate over the day, lengths, shared prefixes, traces
:mod:`.router`              where each request goes
:mod:`.admission`           queue limits and timeouts
:mod:`.autoscaler`          the replica count a signal asks for
:mod:`.startup`             cold start of a new replica, and its remedies
:mod:`.failures`            failures, detection, restarts; N + k for a target availability
:mod:`.pricing`             reserved, on-demand and spot replicas over the day
:mod:`.pools`               pools of one model, GPU type and region; round trips and quotas
:mod:`.simulation`          the event loop over :class:`~inferlab.serving.engine.Engine` replicas
:mod:`.control`             the fleet sampled over time, and each pool's autoscaler acting
:mod:`.outages`             failures, detection, restarts and spot reclaims in the loop
:mod:`.states`              request outcomes and event priorities
:mod:`.cascade`             a small model first, a share escalated to a large one
:mod:`.result`              what a run returns; :mod:`.plot` draws it
:mod:`.scenario`            fleet scenario files (a ``fleet:`` section), for ``inferlab fleet``
==========================  ==============================================================
"""

from .admission import Admission
from .api import fleet, fleet_of
from .autoscaler import Autoscaler
from .failures import Failures, availability, replicas_for
from .pricing import Pricing
from .result import FleetResult
from .router import RouterConfig
from .startup import Startup
from .traffic import Profile

__all__ = ["Admission", "Autoscaler", "Failures", "FleetResult", "Pricing", "Profile", "RouterConfig", "Startup",
           "availability", "fleet", "fleet_of", "replicas_for"]
