# frozen_string_literal: true

require "json"
require "securerandom"

# Writes telemetry in the formats of docs/observability.md (journal stream
# entries, per-node observations, node registration), for dashboard tests
# that need exact, hostile or missing data a real worker would not produce
# on demand (a gap in a source's sequence, a stale observation, a task
# name with markup).
class TelemetryFixture
  def initialize(redis, namespace)
    @redis = redis
    @ns = namespace
    @seq = Hash.new(0)
  end

  def now_ms = (Time.now.to_f * 1000).to_i

  def entry(source, event, data, at_ms: now_ms, seq: nil)
    seq ||= (@seq[source] += 1)
    @seq[source] = seq
    @redis.xadd("#{@ns}:telemetry", {"source" => source, "seq" => seq.to_s, "event" => event,
                                     "at_ms" => at_ms.to_s, "data" => JSON.generate(data)})
  end

  # A node as a worker registers it (heartbeat key and nodes set) with its
  # observations hash.
  def node(node_id: SecureRandom.uuid, hostname: "host-a", pid: 4242, at_ms: now_ms, process: true, ractors: 2,
           redis_state: "connected", channels: [["default", 1]], state: "running", dropped: 0)
    description = {"node_id" => node_id, "hostname" => hostname, "pid" => pid, "concurrency" => ractors,
                   "execution_mode" => "ractor", "channels" => channels, "started_ms" => at_ms - 60_000,
                   "version" => SolidJobs::VERSION}
    @redis.set("#{@ns}:node:#{node_id}", JSON.generate(description), px: 60_000)
    @redis.sadd("#{@ns}:nodes", node_id)
    fields = {"node" => JSON.generate(description.merge("at_ms" => at_ms, "state" => state,
                                                        "telemetry" => {"seq" => 120, "dropped" => dropped, "pending" => 0}))}
    if process
      fields["process"] = JSON.generate({"at_ms" => at_ms, "cpu_seconds" => 12.5, "rss_bytes" => 150 * 1024 * 1024,
                                         "gc_count" => 42, "gc_time_ms" => 310.0, "total_allocated_objects" => 1_234_567})
    end
    fields["ractors"] = JSON.generate(Array.new(ractors) do |i|
      {"ractor_id" => i + 10, "worker_id" => i + 1, "state" => i.zero? ? "running" : "waiting",
       "job_ids" => i.zero? ? ["11111111-2222-3333-4444-555555555555"] : [], "at_ms" => at_ms}
    end)
    fields["redis"] = JSON.generate({"state" => redis_state, "at_ms" => at_ms, "last_ok_ms" => at_ms, "stale" => false,
                                     "age_ms" => 0})
    fields["at_ms"] = at_ms.to_s
    @redis.hset("#{@ns}:observations:#{node_id}", fields)
    @redis.pexpire("#{@ns}:observations:#{node_id}", 60_000)
    node_id
  end

  # One metrics.interval per second for `seconds` seconds back from now.
  def intervals(source, seconds: 30, completed: 20, failed: 1)
    seconds.downto(1) do |ago|
      entry(source, "metrics.interval",
            {"interval_ms" => 1000, "completed" => completed, "failed" => failed, "retried" => failed, "dead" => 0,
             "enqueued" => completed + 1,
             "latency_ms" => {"p50" => 3, "p95" => 12, "p99" => 20, "max" => 25, "count" => completed},
             "duration_ms" => {"p50" => 5, "p95" => 9, "p99" => 11, "max" => 14, "count" => completed}},
            at_ms: now_ms - ago * 1000)
    end
  end

  # A job's lifecycle as a node journals it.
  def lifecycle(source, job_id, task:, channel: "default", fail_with: nil, at_ms: now_ms - 2_000)
    entry(source, "job.enqueued", {"job_id" => job_id, "task" => task, "channel" => channel}, at_ms: at_ms)
    entry(source, "job.reserved", {"job_id" => job_id, "task" => task, "channel" => channel}, at_ms: at_ms + 5)
    entry(source, "job.started", {"job_id" => job_id, "task" => task, "channel" => channel, "latency_ms" => 7}, at_ms: at_ms + 7)
    if fail_with # [error_class, error_location]
      entry(source, "job.failed", {"job_id" => job_id, "task" => task, "channel" => channel, "failures" => 1,
                                   "error_class" => fail_with[0], "error_location" => fail_with[1], "duration_ms" => 23},
            at_ms: at_ms + 30)
    else
      entry(source, "job.completed", {"job_id" => job_id, "task" => task, "channel" => channel, "duration_ms" => 23},
            at_ms: at_ms + 30)
    end
  end
end
