# frozen_string_literal: true

require "digest"

module Bench
  # Splits the commands a SolidJobs node ran while idle into its heartbeat
  # and everything else, from MONITOR entries (redis_monitor.rb).
  #
  # The heartbeat is one EVALSHA of crates/solid_core/lua/heartbeat.lua,
  # recognised by that script's SHA1 (how Redis names a loaded script); the
  # commands the script runs itself (SET, SADD, LLEN, SMEMBERS, EXISTS...)
  # follow its EVALSHA line with source "lua" and belong to it. Anything
  # else, another script included, is beyond the heartbeat.
  class HeartbeatAttribution
    SCRIPT_PATH = File.expand_path("../../crates/solid_core/lua/heartbeat.lua", __dir__)
    SCRIPT_CALLS = %w[evalsha evalsha_ro].freeze

    attr_reader :sha

    def initialize(script_path = SCRIPT_PATH)
      @sha = Digest::SHA1.hexdigest(File.read(script_path))
    end

    # {command name => calls} of the heartbeat among `entries`.
    def heartbeat_calls(entries)
      calls = Hash.new(0)
      in_heartbeat = false
      entries.each do |entry|
        in_heartbeat = heartbeat_script?(entry) unless entry.lua?
        calls[entry.name] += 1 if in_heartbeat
      end
      calls
    end

    private

    # The node loads its scripts once and then calls them by SHA, so in an
    # idle window the heartbeat only ever arrives as EVALSHA.
    def heartbeat_script?(entry)
      SCRIPT_CALLS.include?(entry.name) && entry.args.first.to_s.casecmp?(@sha)
    end
  end
end
