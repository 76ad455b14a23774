# frozen_string_literal: true

module Bench
  # What one client connection did during a measured operation: the
  # proxy's counts (`tally`: commands sent, round trips, pub/sub messages
  # received) and, from MONITOR, each command it ran with the commands its
  # Lua script ran (`calls`: [[label, [lua command, ...]], ...]).
  LinkCount = Struct.new(:role, :tally, :calls, keyword_init: true) do
    def commands = tally.commands
    def round_trips = tally.round_trips
    def pushes = tally.pushes
    def lua = calls.sum { |_, inner| inner.size }

    def describe
      parts = OperationCount.squeeze(calls.map { |label, inner| inner.empty? ? label : "#{label}[#{OperationCount.squeeze(inner).join(" ")}]" })
      parts << "#{pushes} doorbell message(s) received" if pushes.positive?
      # The proxy counts what was sent, MONITOR what ran: Redis 7.0 runs
      # nothing for a command it rejects (redis-rs's CLIENT SETINFO at
      # connect), so a difference is shown rather than hidden.
      parts << "(#{commands} sent, #{calls.size} ran)" if commands != calls.size
      "#{role} (#{round_trips} rt): #{parts.join(", ")}"
    end
  end

  # The cost of one operation, summed over the client connections that took
  # part in it.
  OperationCount = Struct.new(:key, :title, :links, keyword_init: true) do
    def self.squeeze(names)
      names.chunk_while { |a, b| a == b }.map { |run| run.size > 1 ? "#{run.first}×#{run.size}" : run.first }
    end

    def commands = links.sum(&:commands)
    def lua = links.sum(&:lua)
    def round_trips = links.sum(&:round_trips)
    def pushes = links.sum(&:pushes)

    # The figures a test asserts.
    def figures = {commands: commands, lua: lua, round_trips: round_trips}

    # One line per connection, in a stable order (connections of different
    # threads interleave differently from run to run).
    def breakdown = links.map(&:describe).sort.join("; ")

    def summary = "#{commands} command(s) sent, #{lua} in Lua, #{round_trips} round trip(s) -- #{breakdown}"
  end
end
