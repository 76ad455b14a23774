# frozen_string_literal: true

module SolidJobs
  VERSION = "0.1.0"
end
