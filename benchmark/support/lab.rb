# frozen_string_literal: true

require "redis"
require "tmpdir"
require "fileutils"
require_relative "child_group"
require_relative "redis_server"

module Bench
  # What a harness runs its cases in: one ChildGroup for every process it
  # starts, a private redis-server (no persistence) with a client on it,
  # and optionally a scratch directory. #close tears all of it down and is
  # safe after a failed start; a harness calls it from `ensure`.
  class Lab
    attr_reader :children, :redis_server, :redis, :dir

    # `tmpdir`: the prefix of a scratch directory, or nil for none.
    def initialize(tmpdir: nil)
      @dir = Dir.mktmpdir(tmpdir) if tmpdir
      @children = ChildGroup.new
      @redis_server = RedisServer.new(@children).start
      @redis = Redis.new(url: @redis_server.url)
    rescue Exception # rubocop:disable Lint/RescueException -- whatever stopped the start, nothing may be left running
      close
      raise
    end

    def url = @redis_server.url

    def close
      @redis&.close
      @redis_server&.stop
      @children&.close
      FileUtils.rm_rf(@dir) if @dir
    end
  end
end
