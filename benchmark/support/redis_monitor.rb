# frozen_string_literal: true

require "socket"
require_relative "common"

module Bench
  # Records every command a redis-server runs, through MONITOR on a
  # connection of its own, read by a background thread. INFO commandstats
  # says how many calls of each command ran; this says which client (or
  # which Lua script) ran them, in the server's execution order.
  #
  # Commands run inside a Lua script show with source "lua", right after
  # the EVAL/EVALSHA line of their script (Redis feeds MONITOR the script's
  # own call first; checked on 7.0).
  class RedisMonitor
    Entry = Struct.new(:source, :name, :args) do
      def lua? = source == "lua"
    end

    LINE = /\A\+[\d.]+ \[\d+ (?<source>[^\]]+)\] (?<rest>.*)\z/
    QUOTED = /"((?:[^"\\]|\\.)*)"/

    def initialize(port, host: "127.0.0.1")
      @host = host
      @port = port
      @entries = []
      @lock = Mutex.new
    end

    def start
      @socket = TCPSocket.new(@host, @port)
      @socket.write("MONITOR\r\n")
      reply = @socket.gets("\r\n")
      raise Failure, "MONITOR answered #{reply.inspect}" unless reply == "+OK\r\n"

      @reader = Thread.new { read_all }
      self
    end

    # The entries recorded so far (a copy).
    def entries = @lock.synchronize { @entries.dup }

    # Waits until the block, given the entries so far, returns true; false
    # when `timeout` passed first. MONITOR output lags the commands a little.
    def wait_for(timeout)
      deadline = Bench.now + timeout
      until yield(entries)
        return false if Bench.now > deadline

        sleep 0.01
      end
      true
    end

    def stop
      @socket&.close
      @reader&.join
    ensure
      @socket = @reader = nil
    end

    private

    def read_all
      while (line = @socket.gets("\r\n"))
        entry = parse(line.chomp("\r\n"))
        @lock.synchronize { @entries << entry } if entry
      end
    rescue IOError, SystemCallError
      nil # closed by #stop
    end

    def parse(line)
      match = LINE.match(line) or return nil
      source = match[:source]
      words = match[:rest].scan(QUOTED).flatten
      return nil if words.empty?

      Entry.new(source, words.first.downcase, words.drop(1))
    end
  end
end
