"""One knowledge-job worker in its own process (tests/recall/test_knowledge_jobs.py stops and resumes it).

argv: <postgres uri> <worker id>. It claims a job with a 1 s lease, prints ``started <job id>``, waits for a line on
stdin, then tries to record success: prints ``succeeded`` or ``lost`` (exit 3).
"""

from __future__ import annotations

import sys

from langgraph.store.postgres import PostgresStore

from ai_utils import KnowledgeJobLostError, KnowledgeJobs


def main() -> int:
    uri, worker_id = sys.argv[1], sys.argv[2]

    def execute(job: object) -> None:
        print(f"started {job.id}", flush=True)  # type: ignore[attr-defined]
        sys.stdin.readline()

    with PostgresStore.from_conn_string(uri) as store:
        jobs = KnowledgeJobs(store)
        try:
            job = jobs.process_next(execute, worker_id=worker_id, lease_seconds=1.0)
        except KnowledgeJobLostError as error:
            print(f"lost {error.job_id}", flush=True)
            return 3
        print(job.state if job is not None else "none", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
