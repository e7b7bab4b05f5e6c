"""Server metrics in Prometheus' text exposition format (GET /metrics). Thread-safe: the worker
thread records generations, the event loop records HTTP responses.

    quickdraft_http_requests_total{route,status}           responses sent, errors included
    quickdraft_generations_total{outcome}                   done | cancelled | timeout | error
    quickdraft_{prompt,completion}_tokens_total
    quickdraft_{accepted,rejected}_prediction_tokens_total  OpenAI's meaning (see core.Stats)
    quickdraft_draft_tokens_total, quickdraft_target_passes_total
    quickdraft_accepted_tokens_per_pass                     accepted draft tokens / target passes, all time
    quickdraft_request_duration_seconds                     histogram: arrival to last token
    quickdraft_queue_wait_seconds                           histogram: arrival to start of generation
    quickdraft_time_to_first_token_seconds                  histogram: arrival to first token
    quickdraft_queue_depth, quickdraft_generation_running  gauges
    quickdraft_worker_restarts_total                        worker threads started again after one died
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from typing import Any

from .worker import Job

BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
OUTCOMES = ("done", "cancelled", "timeout", "error")
TOKEN_COUNTERS = {
    "prompt_tokens": "prompt tokens of finished generations",
    "cached_tokens": "prompt tokens taken from an earlier request's cache instead of computed (prefix reuse)",
    "completion_tokens": "output tokens, every one counted once",
    "accepted_prediction_tokens": "draft tokens the model confirmed that appear in the output",
    "rejected_prediction_tokens": "draft tokens verified and not in the output",
    "draft_tokens": "draft tokens sent for verification",
    "target_passes": "forward passes of the model over drafts (prefill not counted)",
}


class Histogram:
    def __init__(self, buckets: tuple[float, ...] = BUCKETS):
        self.buckets = buckets
        self.counts = [0] * len(buckets)  # non-cumulative; made cumulative when rendered
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        for i, edge in enumerate(self.buckets):
            if value <= edge:
                self.counts[i] += 1
                break
        self.sum += value
        self.count += 1

    def lines(self, name: str) -> list[str]:
        out, total = [], 0
        for edge, n in zip(self.buckets, self.counts):
            total += n
            out.append(f'{name}_bucket{{le="{edge}"}} {total}')
        out += [f'{name}_bucket{{le="+Inf"}} {self.count}', f"{name}_sum {self.sum:.6f}", f"{name}_count {self.count}"]
        return out


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.http = Counter()  # (route, status) -> responses
        self.outcomes = Counter({o: 0 for o in OUTCOMES})
        self.tokens = Counter({k: 0 for k in TOKEN_COUNTERS})
        self.duration = Histogram()
        self.queue_wait = Histogram()
        self.first_token = Histogram()
        self.recent_duration = 0.0  # moving average of generation time, for Retry-After
        self._runs = 0

    def record_response(self, route: str, status: int) -> None:
        with self._lock:
            self.http[(route, status)] += 1

    def record_generation(self, job: Job, outcome: str) -> None:
        s = job.stream.stats
        with self._lock:
            self.outcomes[outcome] += 1
            for k in TOKEN_COUNTERS:
                self.tokens[k] += getattr(s, k)
            end = job.finished or job.started or job.submitted
            self.duration.observe(end - job.submitted)
            if job.started is not None:
                self.queue_wait.observe(job.started - job.submitted)
                run = end - job.started
                self.recent_duration = run if self._runs == 0 else 0.8 * self.recent_duration + 0.2 * run
                self._runs += 1
            if job.first_chunk is not None:
                self.first_token.observe(job.first_chunk - job.submitted)

    def retry_after(self) -> int:
        """Seconds until a queue slot is likely free: about one generation (1..60)."""
        return max(1, min(60, math.ceil(self.recent_duration)))

    def render(self, *, queued: int, running: bool, worker_restarts: int = 0) -> str:
        with self._lock:
            lines = ["# HELP quickdraft_http_requests_total HTTP responses sent, by route and status.",
                     "# TYPE quickdraft_http_requests_total counter"]
            for (route, status), n in sorted(self.http.items()):
                lines.append(f'quickdraft_http_requests_total{{route="{route}",status="{status}"}} {n}')
            lines += ["# HELP quickdraft_generations_total Generations run by the worker, by how they ended.",
                      "# TYPE quickdraft_generations_total counter"]
            lines += [f'quickdraft_generations_total{{outcome="{o}"}} {n}' for o, n in self.outcomes.items()]
            for k, help_ in TOKEN_COUNTERS.items():
                name = f"quickdraft_{k}_total"
                lines += [f"# HELP {name} {help_.capitalize()}.", f"# TYPE {name} counter", f"{name} {self.tokens[k]}"]
            passes = self.tokens["target_passes"]
            per_pass = self.tokens["accepted_prediction_tokens"] / passes if passes else 0.0
            lines += ["# HELP quickdraft_accepted_tokens_per_pass Mean accepted draft tokens per target pass.",
                      "# TYPE quickdraft_accepted_tokens_per_pass gauge", f"quickdraft_accepted_tokens_per_pass {per_pass:.6f}"]
            for name, hist, help_ in (
                ("quickdraft_request_duration_seconds", self.duration, "From arrival to the last token."),
                ("quickdraft_queue_wait_seconds", self.queue_wait, "From arrival to the start of generation."),
                ("quickdraft_time_to_first_token_seconds", self.first_token, "From arrival to the first token."),
            ):
                lines += [f"# HELP {name} {help_}", f"# TYPE {name} histogram", *hist.lines(name)]
        lines += ["# HELP quickdraft_queue_depth Requests waiting for the model.", "# TYPE quickdraft_queue_depth gauge",
                  f"quickdraft_queue_depth {queued}",
                  "# HELP quickdraft_generation_running 1 while the model is generating.",
                  "# TYPE quickdraft_generation_running gauge", f"quickdraft_generation_running {int(running)}",
                  "# HELP quickdraft_worker_restarts_total Worker threads started again after one died.",
                  "# TYPE quickdraft_worker_restarts_total counter", f"quickdraft_worker_restarts_total {worker_restarts}"]
        return "\n".join(lines) + "\n"


class CountResponses:
    """ASGI middleware: counts responses by route and status for /metrics."""

    def __init__(self, app: Any, metrics: Metrics, routes: tuple[str, ...]):
        self.app, self.metrics, self.routes = app, metrics, routes

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope["path"]
        route = path if path in self.routes else "/v1/models/{id}" if path.startswith("/v1/models/") else "other"

        started = False

        async def counting_send(message: dict) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                self.metrics.record_response(route, message["status"])
            await send(message)

        try:
            await self.app(scope, receive, counting_send)
        except Exception:
            if not started:  # answered 500 by Starlette's outermost handler (_server_error), outside this one
                self.metrics.record_response(route, 500)
            raise
