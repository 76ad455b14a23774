# frozen_string_literal: true

require "json"

module SolidJobs
  # The capped archive of jobs given up (final failures, :archive decisions,
  # quarantined entries). Capped by `archive_max_entries` and
  # `archive_max_age`, trimmed on every discard.
  module Archive
    module_function

    def size
      SolidJobs.client.call(["ZCARD", key("archive")]).to_i
    end

    # Newest first. Each entry is the stored record (id, task, channel,
    # reason, error_class, message, backtrace, failures, discarded_ms, raw)
    # plus "envelope", the decoded envelope, or nil when it never decoded.
    def list(limit: 50, offset: 0)
      ids = SolidJobs.client.call(["ZREVRANGE", key("archive"), offset.to_s, (offset + limit - 1).to_s])
      return [] if ids.empty?

      records = SolidJobs.client.call(["HMGET", key("archive:entries"), *ids])
      ids.zip(records).filter_map { |id, raw| raw && decode(id, raw) }
    end

    def find(id)
      raw = SolidJobs.client.call(["HGET", key("archive:entries"), id.to_s])
      raw && decode(id, raw)
    end

    # Puts the job back on its channel with a fresh failure count. Returns
    # false when it is no longer archived; raises EnvelopeError for an entry
    # that never decoded (a quarantined one).
    def reenqueue(id)
      SolidJobs.client.unarchive(id.to_s)
    end

    def decode(id, raw)
      record = JSON.parse(raw)
      record["id"] ||= id
      record["envelope"] = begin
        record["raw"] && Native.decode_envelope(record["raw"])
      rescue EnvelopeError
        nil
      end
      record
    end

    def key(suffix) = "#{SolidJobs.config.namespace}:#{suffix}"
  end
end
