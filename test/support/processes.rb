# frozen_string_literal: true

# Every process helper (see processes/child_process.rb).
require_relative "processes/child_process"
require_relative "processes/redis_server"
require_relative "processes/engine_server"
require_relative "processes/solid_jobs_command"
require_relative "processes/worker_process"
require_relative "processes/web_server_process"
