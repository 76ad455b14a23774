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
      def reenqueue_where(task: nil, error_class: nil) = new.reenqueue_where(task: task, error_class: error_class)
      def reenqueue_all = new.reenqueue_all
    end

    # What a bulk re-enqueue did: `reenqueued` jobs went back on their
    # channels; `undecodable` matching entries never decoded and stay
    # quarantined; `skipped` ones were no longer archived when reached, or
    # their id was live again.
    BulkResult = Struct.new(:reenqueued, :undecodable, :skipped) do
      def to_s = "#{reenqueued} re-enqueued, #{undecodable} undecodable (left quarantined), #{skipped} skipped"
    end

    # Entries read per HSCAN step of a bulk re-enqueue.
    SCAN_COUNT = 500

    # One page of #page: `entries` newest first, `next_cursor` to continue
    # after the last entry examined (nil when the archive ends there), how
    # many entries were `scanned` to find them.
    Page = Struct.new(:entries, :next_cursor, :scanned) # rubocop:disable Lint/StructNewOverride -- a page's entries, as Array#entries
    # Bounds of one #page call: entries returned, and entries examined to
    # find them (a filter that matches little stops there and says where).
    PAGE_MAX = 100
    PAGE_SCAN_MAX = 1000
    # Ids read per ZREVRANGEBYSCORE (and records per HMGET) while paging.
    PAGE_STEP = 200
    # "<discarded_ms>:<id>": where a page ended.
    CURSOR = /\A(\d{1,16}):([A-Za-z0-9_.:-]{1,128})\z/

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

    # Newest first (discard time, then id descending, as Redis orders the
    # archive), up to `limit` entries the block accepts (all without a
    # block), examining at most `scan` entries: every read is bounded, so
    # a request never loads the whole archive. `cursor` (a page's
    # next_cursor) continues after that entry; the order is stable while
    # jobs are archived meanwhile (they are newer than any cursor).
    def page(limit: 50, cursor: nil, scan: PAGE_SCAN_MAX, &accept)
      limit = limit.to_i.clamp(1, PAGE_MAX)
      scan = scan.to_i.clamp(limit, PAGE_SCAN_MAX)
      entries = []
      scanned = 0
      last = nil
      each_after(cursor) do |id, score, record|
        scanned += 1
        last = "#{score}:#{id}"
        entries << record if record && (accept.nil? || accept.call(record))
        break if entries.size >= limit || scanned >= scan
      end
      Page.new(entries, scanned.positive? && last && more_after?(last) ? last : nil, scanned)
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

    # Re-enqueues every archived job of `task` (the envelope's task name)
    # and/or whose failure was `error_class` (as recorded: "ArgumentError",
    # "SolidJobs::UnknownTaskError"), like #reenqueue each: one atomic
    # script per job, so a job is put back at most once even when two
    # operators run this at the same time. Returns a BulkResult.
    def reenqueue_where(task: nil, error_class: nil)
      raise ArgumentError, "reenqueue_where needs task: or error_class: (reenqueue_all takes all)" unless task || error_class

      bulk_reenqueue do |record, envelope|
        (task.nil? || (envelope ? envelope["task"] : record["task"]) == task.to_s) &&
          (error_class.nil? || record["error_class"] == error_class.to_s)
      end
    end

    # Re-enqueues every archived job that decodes. Returns a BulkResult.
    def reenqueue_all
      bulk_reenqueue { true }
    end

    # Removes an archived job for good. false when it was not archived.
    def forget(id)
      @client.forget_archived(id.to_s)
    end

    private

    # Walks the archive entries with HSCAN (a bounded step at a time, so
    # Redis is never blocked and the archive may be large) and re-enqueues
    # those the block accepts. An entry re-enqueued while the scan runs is
    # gone from the hash; one met twice by the scan is not archived the
    # second time and counts as skipped.
    def bulk_reenqueue
      result = BulkResult.new(0, 0, 0)
      cursor = "0"
      loop do
        cursor, flat = @client.call(["HSCAN", @keys.archive_entries, cursor, "COUNT", SCAN_COUNT.to_s])
        flat.each_slice(2) do |id, raw|
          record = parse_record(raw) || {}
          envelope = decodable(record["raw"])
          next unless yield(record, envelope)
          next result.undecodable += 1 unless envelope

          reenqueue(id) ? result.reenqueued += 1 : result.skipped += 1
        end
        break if cursor == "0"
      end
      result
    end

    # Yields [id, score, record] newest first after `cursor`, PAGE_STEP ids
    # per read: first the cursor's ties (same discard time, smaller id),
    # then everything older.
    def each_after(cursor, &block)
      score, after = cursor && CURSOR.match(cursor.to_s)&.captures
      if score
        walk(score, score) { |id, sc, record| id < after ? block.call(id, sc, record) : nil }
        walk("(#{score}", "-inf", &block)
      else
        walk("+inf", "-inf", &block)
      end
    end

    def walk(max, min)
      offset = 0
      loop do
        flat = @client.call(["ZREVRANGEBYSCORE", @keys.archive, max, min, "WITHSCORES", "LIMIT", offset.to_s,
                             PAGE_STEP.to_s])
        pairs = flat.each_slice(2).map { |id, sc| [id, sc.to_i] }
        return if pairs.empty?

        records = @client.call(["HMGET", @keys.archive_entries, *pairs.map(&:first)])
        pairs.zip(records).each { |(id, sc), raw| yield id, sc, raw && decode(id, raw) }
        return if pairs.size < PAGE_STEP

        offset += PAGE_STEP
      end
    end

    # Whether anything follows `cursor`, in two small reads.
    def more_after?(cursor)
      score, after = CURSOR.match(cursor).captures
      return true if @client.call(["ZCOUNT", @keys.archive, "-inf", "(#{score}"]).to_i.positive?

      smallest = @client.call(["ZRANGEBYSCORE", @keys.archive, score, score, "LIMIT", "0", "1"]).first
      !smallest.nil? && smallest < after
    end

    def parse_record(raw)
      record = JSON.parse(raw)
      record.is_a?(Hash) ? record : nil
    rescue JSON::ParserError
      nil
    end

    def decodable(raw)
      raw.is_a?(String) ? Native.decode_envelope(raw) : nil
    rescue EnvelopeError
      nil
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
  end
end
