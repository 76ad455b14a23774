# frozen_string_literal: true

module SolidJobs
  # Finding keys by pattern without blocking Redis (SCAN, never KEYS), for
  # the read-only reports. Patterns come from Native::Keyspace
  # (`channel_pattern`, `claims_pattern`, `observations_pattern`).
  module Scan
    module_function

    # Every key matching `pattern`, each once: SCAN may return a key more
    # than once while the keyspace is rehashed.
    def keys(client, pattern)
      keys = []
      cursor = "0"
      loop do
        cursor, batch = client.call(["SCAN", cursor, "MATCH", pattern, "COUNT", "1000"])
        keys.concat(batch)
        break if cursor == "0"
      end
      keys.uniq
    end

    # What the trailing `*` matched in each key (a channel name, a node id).
    def names(client, pattern)
      prefix = pattern.delete_suffix("*")
      keys(client, pattern).map { |k| k.delete_prefix(prefix) }
    end
  end
end
