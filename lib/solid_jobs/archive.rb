# frozen_string_literal: true

require "json"

module SolidJobs
  # The capped archive of jobs given up (final failures, :archive decisions,
  # quarantined entries). Capped by `archive_max_entries` and
  # `archive_max_age`, trimmed on every discard.
  #
  # The one reader and writer of the archive keys: `Console` shows the same
  # records redacted (no arguments, no messages) for operators, through an
  # instance of this class. The class methods use the configured client and
  # namespace:
  #
  #   SolidJobs::Archive.list(limit: 50)
  #   SolidJobs::Archive.new(client: other, namespace: "staging").size
  class Archive
    class << self
      def size = new.size
      def list(limit: 50, offset: 0) = new.list(limit: limit, offset: offset)
      def find(id) = new.find(id)
      def reenqueue(id) = new.reenqueue(id)
    end

    def initialize(client: SolidJobs.client, namespace: SolidJobs.config.namespace)
      @client = client
      @keys = Native::Keyspace.new(namespace)
    end

    def size
      @client.call(["ZCARD", @keys.archive]).to_i
    end

    # Newest first. Each entry is the stored record (id, task, channel,
    # reason, error_class, message, backtrace, failures, discarded_ms, raw)
    # plus "envelope", the decoded envelope, or nil when it never decoded.
    def list(limit: 50, offset: 0)
      ids = @client.call(["ZREVRANGE", @keys.archive, offset.to_s, (offset + limit - 1).to_s])
      return [] if ids.empty?

      records = @client.call(["HMGET", @keys.archive_entries, *ids])
      ids.zip(records).filter_map { |id, raw| raw && decode(id, raw) }
    end

    def find(id)
      raw = @client.call(["HGET", @keys.archive_entries, id.to_s])
      raw && decode(id, raw)
    end

    # Puts the job back on its channel with a fresh failure count. Returns
    # false when it is no longer archived; raises EnvelopeError for an entry
    # that never decoded (a quarantined one).
    def reenqueue(id)
      @client.unarchive(id.to_s)
    end

    # Removes an archived job for good. false when it was not archived.
    def forget(id)
      @client.forget_archived(id.to_s)
    end

    private

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
  end
end
