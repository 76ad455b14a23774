# frozen_string_literal: true

require "json"

module SolidJobs
  # Operator actions on single jobs: find one by id, and list, retry or
  # discard archived ones (through `Archive`, which owns the archive keys;
  # this class only redacts what it returns).
  #
  # Nothing returned here carries a job's arguments, its raw envelope or an
  # error message (messages often quote arguments): ids, task, channel,
  # state, times, counts, error classes and backtrace locations only. The
  # full records stay in Redis (`SolidJobs::Archive.find` in a console).
  class Console
    ENVELOPE_FIELDS = %w[task channel max_failures created_ms queued_ms].freeze
    # `unknown`, `first_unknown_ms`: attempts on workers that did not define
    # the task (docs/reliability.md, "Unknown tasks").
    FAILURE_FIELDS = %w[failures first_failure_ms last_failure_ms error_class unknown first_unknown_ms].freeze
    ARCHIVE_FIELDS = %w[id task channel reason kind error_class failures discarded_ms backtrace].freeze

    def initialize(client: SolidJobs.client, routing: SolidJobs.routing, namespace: SolidJobs.config.namespace)
      @client = client
      @routing = routing
      @keys = Native::Keyspace.new(namespace)
      @archive = Archive.new(client: client, namespace: namespace)
    end

    # Ids of completed jobs Redis keeps (the newest; ack.lua, which writes
    # them in the call that completes the jobs): solid_core's
    # `store::COMPLETED_KEPT`, which the script is given (one definition).
    COMPLETED_KEPT = Native::COMPLETED_KEPT
    # Dead jobs read from a SolidEngine per call (DEAD has no cursor; the
    # engine keeps the newest `dead_max`).
    ENGINE_DEAD_MAX = 1000

    # {"id", "state", "channel", "task", ..., failure record fields} or nil.
    # States: ready, planned, retrying, claimed, cancelled, archived, and
    # blocked (over its concurrency limit: docs/flow-control.md), throttled
    # (over its rate limit) (Redis);
    # scheduled, ready, reserved, completed, dead, cancelled (SolidEngine).
    #
    # A job completed on Redis leaves no record but its id in the list of
    # the newest COMPLETED_KEPT completions: then {"id", "state" =>
    # "completed", "retained" => false, "completions_since" => n} (n jobs
    # completed after it). nil means unknown: never enqueued here, or
    # completed longer ago than that list (on SolidEngine: than the engine's
    # completed_retention_ms, 60 s by default) reaches.
    def find(job_id)
      id = job_id.to_s
      @routing.backends.each_value do |backend|
        found = begin
          backend.get_job(id)
        rescue Backends::NotSupported
          nil
        end
        next unless found

        job = {"id" => id, "state" => found["state"], "channel" => found["channel"], "backend" => backend.name.to_s}
        envelope = found["envelope"]
        job.merge!(envelope.slice(*ENVELOPE_FIELDS)) if envelope.is_a?(Hash)
        job.merge!(unique_fields(id, envelope)) if envelope.is_a?(Hash) && backend.is_a?(Backends::Redis)
        job["attempts"] = found["attempts"] if found["attempts"]
        job.merge!(failure_record(id)) if backend.is_a?(Backends::Redis)
        job.merge!(archived_fields(id)) if found["state"] == "archived"
        return job.compact
      end
      completed(id)
    end

    # Newest first, without arguments or messages.
    def archived(limit: 50, offset: 0)
      @archive.list(limit: limit, offset: offset).map { |record| redact(record) }
    end

    # One page of archived jobs, newest first, filtered by task, error
    # class and channel (exact names); Archive#page bounds every read.
    # Returns an Archive::Page of redacted records.
    def archive_page(task: nil, error_class: nil, channel: nil, limit: 50, cursor: nil)
      wanted = {"task" => task, "error_class" => error_class, "channel" => channel}.compact.transform_values(&:to_s)
      page = @archive.page(limit: limit, cursor: cursor) { |record| matches?(redact(record), wanted) }
      Archive::Page.new(page.entries.map { |record| redact(record) }, page.next_cursor, page.scanned)
    end

    # Dead jobs of a SolidEngine backend, newest first, at most `limit`
    # read, filtered as #archive_page: {"id", "task", "channel", "attempts",
    # "reason", "error_class", "backend", "state" => "dead"}. The engine
    # stores the reason a worker sent ("reason (ErrorClass: message)"): only
    # the reason and the class are returned, never the message.
    def engine_dead(backend, limit: 100, task: nil, error_class: nil, channel: nil)
      wanted = {"task" => task, "error_class" => error_class, "channel" => channel}.compact.transform_values(&:to_s)
      rows = backend.client.call(["DEAD", limit.to_i.clamp(1, ENGINE_DEAD_MAX).to_s])
      rows.filter_map do |id, _channel_id, attempts, reason, payload|
        envelope = decode_envelope(payload)
        job = {"id" => id, "state" => "dead", "backend" => backend.name.to_s, "attempts" => attempts}
        job.merge!(envelope.slice(*ENVELOPE_FIELDS)) if envelope
        job.merge!(engine_reason(reason))
        job.compact if matches?(job, wanted)
      end
    end

    # Puts an archived job back on its channel with a fresh failure count.
    # false when it is no longer archived.
    def retry_archived(job_id) = @archive.reenqueue(job_id)

    # Removes an archived job for good. false when it was not archived.
    def discard_archived(job_id) = @archive.forget(job_id)

    private

    # The reason a worker sends with FAIL: "<reason> (<ErrorClass>: <message>)",
    # the reason as the Redis archive records it; cut before the message.
    ENGINE_REASON = /\A(.{1,200}?) \(((?:[A-Z][A-Za-z0-9_]*)(?:::[A-Z][A-Za-z0-9_]*)*|-): /m

    def engine_reason(raw)
      m = ENGINE_REASON.match(raw.to_s) or return {}

      {"reason" => m[1], "error_class" => m[2] == "-" ? nil : m[2]}
    end

    def decode_envelope(payload)
      payload.is_a?(String) && !payload.empty? ? Native.decode_envelope(payload) : nil
    rescue EnvelopeError
      nil
    end

    def matches?(job, wanted) = wanted.all? { |key, value| job[key].to_s == value }

    # Read only when no backend knows the id: the bounded list ack.lua
    # writes, one element per batch ("<processed total> id1 id2 ..."),
    # newest first, read in slices until the id shows. The list holds at
    # most COMPLETED_KEPT ids plus 1/16 of that and one batch (ack.lua looks
    # at its oldest element once per 1/16; under half a megabyte) in at
    # most as many elements, so an unknown id costs at most ~20 reads.
    COMPLETED_READ = 500

    def completed(id)
      redis = @routing.backends.values.find { |b| b.is_a?(Backends::Redis) } or return nil
      newest = nil
      (0..).step(COMPLETED_READ) do |from|
        batches = @client.call(["LRANGE", @keys.completed, from.to_s, (from + COMPLETED_READ - 1).to_s])
        return nil if batches.empty?

        batches.each do |batch|
          total, *ids = batch.split(" ")
          newest ||= total.to_i
          next unless (index = ids.index(id))

          # The job was completion number total - (ids after it in its batch).
          since = newest - (total.to_i - (ids.size - 1 - index))
          return {"id" => id, "state" => "completed", "retained" => false, "completions_since" => since,
                  "backend" => redis.name.to_s}
        end
      end
    end

    # A unique job's lock (docs/unique.md), when its envelope is known:
    # {"unique" => {"lock" => key, "while" => mode, "held" => whether the
    # lock still names this job}}.
    def unique_fields(id, envelope)
      lock = envelope.dig("meta", "unique")
      return {} unless lock.is_a?(Hash) && lock["lock"].is_a?(String)

      key = @keys.unique(lock["lock"])
      {"unique" => {"lock" => key, "while" => lock["while"].to_s, "held" => @client.call(["GET", key]) == id}}
    end

    def failure_record(id)
      raw = @client.call(["HGET", @keys.attempts, id])
      raw ? JSON.parse(raw).slice(*FAILURE_FIELDS) : {}
    rescue JSON::ParserError
      {}
    end

    def archived_fields(id)
      record = @archive.find(id)
      record ? redact(record).except("id", "channel") : {}
    end

    def redact(record)
      out = record.slice(*ARCHIVE_FIELDS)
      envelope = record["envelope"]
      out.merge!(envelope.slice(*ENVELOPE_FIELDS)) if envelope.is_a?(Hash)
      out["state"] = "archived"
      out
    end
  end
end
