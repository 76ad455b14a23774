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

    # {"id", "state", "channel", "task", ..., failure record fields} or nil.
    # States: ready, planned, retrying, claimed, cancelled, archived (Redis);
    # scheduled, ready, reserved, completed, dead, cancelled (SolidEngine).
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
        job["attempts"] = found["attempts"] if found["attempts"]
        job.merge!(failure_record(id)) if backend.is_a?(Backends::Redis)
        job.merge!(archived_fields(id)) if found["state"] == "archived"
        return job.compact
      end
      nil
    end

    # Newest first, without arguments or messages.
    def archived(limit: 50, offset: 0)
      @archive.list(limit: limit, offset: offset).map { |record| redact(record) }
    end

    # Puts an archived job back on its channel with a fresh failure count.
    # false when it is no longer archived.
    def retry_archived(job_id) = @archive.reenqueue(job_id)

    # Removes an archived job for good. false when it was not archived.
    def discard_archived(job_id) = @archive.forget(job_id)

    private

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
